"""commfuse.spawn: return values, environment, and failures surfacing in the parent with
the failing rank and its traceback."""

import os
import threading
import time

import pytest

import commfuse
from ranks import run


def _env_body(rank, tag):
    keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]
    return tag, rank, {k: os.environ.get(k) for k in keys}


def test_results_in_rank_order_and_environment():
    results = run(_env_body, 3, "t")
    assert [r[:2] for r in results] == [("t", 0), ("t", 1), ("t", 2)]
    ports = {r[2]["MASTER_PORT"] for r in results}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    for rank, (_, _, env) in enumerate(results):
        assert env["RANK"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "3"
        assert env["MASTER_ADDR"] == "127.0.0.1"


def _raise_on_rank(rank, bad_rank):
    if rank == bad_rank:
        raise ValueError(f"boom from rank {rank}")
    return rank


def test_child_exception_surfaces_with_rank_and_traceback():
    with pytest.raises(commfuse.ProcessRaisedException) as info:
        run(_raise_on_rank, 3, 2)
    e = info.value
    assert e.rank == e.error_index == 2 and isinstance(e.pid, int)
    text = str(e)
    assert "process 2 (rank 2" in text
    assert "Traceback (most recent call last)" in text and "_raise_on_rank" in text
    assert "ValueError: boom from rank 2" in text
    assert isinstance(e.exception, ValueError) and str(e.exception) == "boom from rank 2"
    assert isinstance(e, commfuse.SpawnError)


class TwoArgError(Exception):
    """Pickles, but does not unpickle: pickle calls TwoArgError(message) with one argument."""

    def __init__(self, what, code):
        super().__init__(f"{what} (code {code})")


def _raise_two_arg_error(rank):
    if rank == 1:
        raise TwoArgError("rank 1 failed", 7)
    threading.Event().wait(60)  # the parent must end these ranks, not wait for them
    return rank


def _return_two_arg_error(rank):
    return TwoArgError("a result", 3)


def test_an_exception_the_parent_cannot_unpickle_still_surfaces_with_its_rank():
    # Its TypeError escaped join(): no ProcessRaisedException, and the other ranks were left
    # running unsupervised (the parent could not exit until they ended by themselves).
    ctx = commfuse.spawn(_raise_two_arg_error, nprocs=3, join=False, start_method="fork",
                         grace=0.5)
    with pytest.raises(commfuse.ProcessRaisedException) as info:
        ctx.join()
    e = info.value
    assert e.rank == 1 and e.exception is None, (e.rank, e.exception)
    assert "TwoArgError: rank 1 failed (code 7)" in str(e), str(e)
    assert not any(p.is_alive() for p in ctx.processes)
    with pytest.raises(commfuse.ProcessRaisedException,
                       match="return value cannot be unpickled in the parent") as info:
        run(_return_two_arg_error, 1)
    assert info.value.rank == 0


def _raise_while_peers_wait(rank):
    comm = commfuse.init()
    if rank == 1:
        raise KeyError("rank 1 gives up")
    comm.barrier()  # peers notice rank 1's death and fail by themselves


def test_peers_of_a_raising_rank_do_not_hang():
    with pytest.raises(commfuse.ProcessRaisedException) as info:
        run(_raise_while_peers_wait, 3)
    assert info.value.rank == 1 and "rank 1 gives up" in str(info.value)


def _exit_on_rank(rank):
    if rank == 1:
        os._exit(3)


def test_child_exit_without_exception():
    with pytest.raises(commfuse.ProcessExitedException) as info:
        run(_exit_on_rank, 2)
    assert info.value.rank == 1 and info.value.exit_code == 3
    assert "exit code 3" in str(info.value)


def _commfuse_error_on_rank(rank):
    with commfuse.init() as comm:
        if rank == 0:
            commfuse.all_gather_base_mm(__import__("numpy").ones((2, 2), "float32"),
                                        __import__("numpy").ones((3, 2), "float32"),
                                        comm.name, comm.world_size)
        else:
            comm.barrier()


def test_commfuse_error_in_child_keeps_its_class_and_code():
    with pytest.raises(commfuse.ProcessRaisedException) as info:
        run(_commfuse_error_on_rank, 2)
    # Whichever rank is reported first, the exception object is a commfuse.Error.
    err = info.value.exception
    assert isinstance(err, commfuse.Error), info.value
    assert err.code in (161002, 361001) and "x2 dim 0 is 3" in err.message


def test_join_false_and_bad_nprocs():
    ctx = commfuse.spawn(_raise_on_rank, args=(-1,), nprocs=2, join=False, start_method="fork")
    assert len(ctx.pids()) == 2
    assert ctx.join() == [0, 1]
    with pytest.raises(ValueError, match="nprocs"):
        commfuse.spawn(_raise_on_rank, nprocs=0)


@pytest.mark.parametrize("call, error, text", [
    # the count where args goes: multiprocessing had said "'int' object is not iterable"
    (lambda: commfuse.spawn(_raise_on_rank, 2), TypeError,
     "spawn: args must be a sequence of fn's arguments after the rank (a tuple), got int 2"),
    (lambda: commfuse.spawn(_raise_on_rank, "ab"), TypeError, "got str 'ab'"),
    (lambda: commfuse.spawn("not a function"), TypeError, "spawn: fn must be callable, got str"),
    (lambda: commfuse.spawn(_raise_on_rank, (-1,), 2.0), TypeError,
     "spawn: nprocs must be an int, got float 2.0"),
    (lambda: commfuse.spawn(_raise_on_rank, (-1,), True), TypeError, "got bool True"),
    (lambda: commfuse.spawn(_raise_on_rank, (-1,), 1, grace=-1), ValueError,
     "spawn: grace must be a number of seconds >= 0, got -1"),
    (lambda: commfuse.spawn(_raise_on_rank, (-1,), 1, grace=float("nan")), ValueError, "got nan"),
])
def test_misplaced_or_mistyped_arguments_are_named_before_anything_starts(call, error, text):
    with pytest.raises(error) as info:
        call()
    assert text in str(info.value)


def _hang(rank):
    if rank == 1:
        import threading

        threading.Event().wait()  # never set: this rank never returns
    return rank


def test_join_timeout_terminates_the_stragglers():
    ctx = commfuse.spawn(_hang, nprocs=2, join=False, start_method="fork")
    with pytest.raises(TimeoutError, match=r"ranks \[1\] did not finish"):
        ctx.join(timeout=1.0)
    assert not any(p.is_alive() for p in ctx.processes)


def _all_reduce_loop(rank):
    import numpy as np

    with commfuse.init() as comm:
        for _ in range(10):
            comm.all_reduce(np.ones(16, np.float32))


def _init_only(rank):
    with commfuse.init():
        return rank


def _commfuse_segments():
    return {n for n in os.listdir("/dev/shm") if n.startswith("commfuse-")}


def test_a_rank_killed_during_init_leaves_no_segment(monkeypatch):
    # Rank 1 dies right after creating its shared memory, before its peers learn the name:
    # only spawn, which knows its pid, can remove it.
    monkeypatch.setenv("COMMFUSE_FAULT", "1:comm_init:0:kill")
    monkeypatch.setenv("COMMFUSE_TIMEOUT_S", "5")
    before = _commfuse_segments()
    with pytest.raises(commfuse.SpawnError) as info:
        run(_init_only, 2)
    assert info.value.rank == 1 or "rank 1" in str(info.value), str(info.value)
    left = _commfuse_segments() - before
    if left:  # tests running beside this one have segments for milliseconds
        time.sleep(3)
        left &= _commfuse_segments()
    assert not left, left


@pytest.mark.parametrize("action", ["kill", "exit"])
def test_fault_injection_is_reported_with_the_faulty_rank(monkeypatch, action):
    # COMMFUSE_FAULT (read in each child): rank 1 dies inside its first all_reduce; spawn
    # names it, or rank 0's RuntimeFailure names it, whichever it sees first.
    monkeypatch.setenv("COMMFUSE_FAULT", f"1:all_reduce:0:{action}")
    monkeypatch.setenv("COMMFUSE_TIMEOUT_S", "5")
    with pytest.raises(commfuse.SpawnError) as info:
        run(_all_reduce_loop, 2)
    e = info.value
    if e.rank == 1:
        assert isinstance(e, commfuse.ProcessExitedException), e
        assert ("SIGKILL" in str(e)) if action == "kill" else e.exit_code == 3, str(e)
    else:
        assert isinstance(e.exception, commfuse.RuntimeFailure) and "rank 1" in str(e), str(e)


def _init_with_env_on_rank_1(rank, name, value):
    if rank == 1:
        os.environ[name] = value
    t0 = time.monotonic()
    try:
        with commfuse.init():
            return ("formed", time.monotonic() - t0, "")
    except commfuse.Error as e:
        return (type(e).__name__, time.monotonic() - t0, str(e))


@pytest.mark.parametrize("name,value,text", [
    ("COMMFUSE_LOG", "chatty", "COMMFUSE_LOG='chatty' is not one of"),
    ("COMMFUSE_TIMEOUT_S", "soon", "COMMFUSE_TIMEOUT_S='soon' is not a non-negative integer"),
    ("COMMFUSE_VERBOSE", "9", "COMMFUSE_VERBOSE=9 must be in [0, 2]"),
    ("COMMFUSE_INT8_GEMM", "fastest", "COMMFUSE_INT8_GEMM='fastest' is not one of"),
    ("COMMFUSE_ALGO", "allreduce:two_shot",
     "COMMFUSE_ALGO='allreduce:two_shot': 'allreduce' is not an op with algorithms"),
    ("COMMFUSE_ALGO", "all_reduce:bogus",
     "COMMFUSE_ALGO: all_reduce has no algorithm 'bogus' (one_shot|two_shot)"),
    # tracing had only logged a warning and stopped: exit 0, no trace
    ("COMMFUSE_TRACE", "/proc/nonexistent/t.json",
     "COMMFUSE_TRACE='/proc/nonexistent/t.json' cannot be written: No such file or directory"),
    ("COMMFUSE_FAULT", "garbage", "COMMFUSE_FAULT='garbage' must be"),
    # had been checked only where the host was identified, after the first exchange: rank 0
    # got "lost connection to rank 1"
    ("COMMFUSE_HOST_ID", "a\nb", "COMMFUSE_HOST_ID must be one line (it holds a line break)"),
])
def test_a_bad_parameter_on_one_rank_fails_every_rank_at_init(monkeypatch, name, value, text):
    # Rank 1 alone had failed, leaving rank 0 to wait out COMMFUSE_TIMEOUT_S ("rank 1 did not
    # connect"); a bad COMMFUSE_ALGO passed init and failed rank 1 alone in its first call,
    # whose peers then paired it with its next one (wrong sums, no error).
    monkeypatch.setenv("COMMFUSE_TIMEOUT_S", "60")
    got = run(_init_with_env_on_rank_1, 2, name, value)
    assert got[1][0] == "InvalidArgument" and text in got[1][2], got[1]
    assert got[0][0] == "RuntimeFailure", got[0]
    assert f"comm init(rank 0): rank 1 failed: {text}" in got[0][2], got[0]
    assert got[0][1] < 30, got[0]  # told, not timed out at 60 s


def test_a_bad_parameter_is_reported_also_when_the_group_never_forms(monkeypatch):
    # Rank 0 of two, alone: its own error, not only "rank 1 did not connect", which had hidden it.
    monkeypatch.setenv("COMMFUSE_TIMEOUT_S", "1")
    monkeypatch.setenv("COMMFUSE_SHM_SLOT_BYTES", "100")
    with pytest.raises(commfuse.InvalidArgument) as info:
        commfuse.init(0, 2, f"tcp://127.0.0.1:{commfuse.free_port()}")
    text = str(info.value)
    assert "COMMFUSE_SHM_SLOT_BYTES=100 must be a multiple of 64 in [4096, 1073741824]" in text, text
    assert "(the group did not form to hear it: bootstrap(rank 0): rank 1 did not connect" in text


@pytest.mark.parametrize("name,value", [("COMMFUSE_NONTEMPORAL_BYTES", "lots"),
                                        ("COMMFUSE_COPY_LOOP", "sometimes")])
def test_a_bad_parameter_fails_comm_init_naming_it(monkeypatch, name, value):
    # Read at communicator creation (before the peers are waited for), not by the first
    # large copy deep in a collective.
    monkeypatch.setenv(name, value)
    with pytest.raises(commfuse.ProcessRaisedException) as info:
        run(_init_only, 2)
    assert isinstance(info.value.exception, commfuse.InvalidArgument), str(info.value)
    assert f"{name}='{value}'" in str(info.value)
