"""A call that fails over MPI (a timeout here) keeps its arrays alive until the process ends:
MPI may still complete a transfer into them if the late peer resumes (docs/reliability.md,
"A failed call's buffers over MPI"), so freeing them would let it write into memory Python
has reused. A call that succeeds, one rejected while the communicator stays usable, or one
on a communicator already unusable keeps nothing. (What is checked is the keeping: the late
peer here never sends.)"""

import os
import shutil
import subprocess
import sys

import pytest

WORKER = r"""
import gc, sys, time, weakref
import numpy as np
import commfuse
from commfuse import _commfuse

c = commfuse.init(init_method="mpi")
assert c.transport == "mpi", c.transport
LOG = open(sys.argv[1] + f".{c.rank}", "a")

def say(*parts):
    # Each rank writes its own file: mpirun merges the ranks' stdout in whatever pieces it
    # reads them, which once spliced one rank's line into the other's.
    print(*parts, file=LOG, flush=True)
n = 1 << 20  # 4 MiB of float32 a rank

def dropped(make_and_call):
    # Runs a call on fresh arrays, drops them and says whether they were freed.
    refs = make_and_call()
    gc.collect()
    return all(r() is None for r in refs)

def ok_call():
    src, dst = np.ones(n, np.float32), np.empty(2 * n, np.float32)
    c.all_gather(src, dst)
    assert (dst == 1).all()
    return [weakref.ref(src), weakref.ref(dst)]

say(c.rank, "ok call freed", dropped(ok_call), _commfuse._arrays_kept_after_failures())

def rejected_call():
    src, dst = np.ones(n, np.float32), np.empty(3, np.float32)  # dst too small, on every rank
    try:
        c.all_gather(src, dst)
    except commfuse.InvalidArgument:
        pass
    return [weakref.ref(src), weakref.ref(dst)]

say(c.rank, "rejected call freed", dropped(rejected_call), c.usable,
    _commfuse._arrays_kept_after_failures())

if c.rank == 1:
    time.sleep(60)  # rank 0's call times out meanwhile; mpirun ends this rank when 0 exits
    sys.exit(0)

def failed_call():
    src, dst = np.ones(n, np.float32), np.empty(2 * n, np.float32)
    try:
        c.all_gather(src, dst)
        say(0, "the call did not fail")
    except commfuse.RuntimeFailure as e:
        say(0, "failed:", str(e).splitlines()[0])
    return [weakref.ref(src), weakref.ref(dst)]

say(0, "failed call freed", dropped(failed_call), c.usable,
    _commfuse._arrays_kept_after_failures())

def call_on_a_dead_comm():
    src, dst = np.ones(n, np.float32), np.empty(2 * n, np.float32)
    try:
        c.all_gather(src, dst)
    except commfuse.RuntimeFailure:
        pass
    return [weakref.ref(src), weakref.ref(dst)]

say(0, "dead comm call freed", dropped(call_on_a_dead_comm),
    _commfuse._arrays_kept_after_failures())
os._exit(0)  # not MPI_Finalize: the late peer's transfer may be pending
"""


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_a_call_that_fails_over_mpi_keeps_its_arrays(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER.replace("import gc, sys", "import gc, os, sys"))
    log = tmp_path / "rank.log"
    # The timeout bounds set-up and the calls that succeed too: 3 s leaves a loaded machine
    # room, and rank 0's failing call ends after it.
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               COMMFUSE_TRANSPORT="mpi", COMMFUSE_TIMEOUT_S="3",
               OMPI_MCA_orte_tmpdir_base=str(tmp_path))
    proc = subprocess.run(
        ["mpirun", "--oversubscribe", "--mca", "btl", "tcp,self", "-n", "2",
         "-x", "COMMFUSE_TRANSPORT", "-x", "COMMFUSE_TIMEOUT_S", "-x", "PYTHONPATH",
         sys.executable, str(script), str(log)],
        capture_output=True, text=True, timeout=120, env=env)
    mpirun = proc.stdout + proc.stderr
    lines = {}
    for rank in (0, 1):
        path = tmp_path / f"rank.log.{rank}"
        lines[rank] = path.read_text().splitlines() if path.exists() else []
    why = f"{lines}\nmpirun printed:\n{mpirun}"
    for rank in (0, 1):
        assert f"{rank} ok call freed True 0" in lines[rank], why
        assert f"{rank} rejected call freed True True 0" in lines[rank], why
    assert any(line.startswith("0 failed: all_gather(rank 0): timed out after 3 s")
               for line in lines[0]), why
    # Two arrays kept (src and dst), the communicator unusable.
    assert "0 failed call freed False False 2" in lines[0], why
    # A later call on the unusable communicator fails before it posts anything: not kept.
    assert "0 dead comm call freed True 2" in lines[0], why
