"""The timeline (COMMFUSE_TRACE, `commfuse bench --trace`, docs/tracing.md): a real run's
trace has one track per rank, spans that do not overlap within a thread (only nest), and
the pieces of the streamed schedule; commfuse.trace.check rejects traces that do not."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import commfuse
import commfuse.trace as ctrace

REPO = pathlib.Path(__file__).resolve().parents[2]


def cli() -> str:
    path = os.environ.get("COMMFUSE_CLI") or str(REPO / "build" / "bin" / "commfuse")
    assert os.access(path, os.X_OK), f"commfuse CLI not found at {path} (set COMMFUSE_CLI)"
    return path


@pytest.mark.parametrize("transport,world", [("shm", 2), ("shm", 3), ("mpi", 2)])
def test_bench_trace_structure(tmp_path, transport, world):
    trace = tmp_path / "t.json"
    # The fused schedule forced: over MPI the list takes the unfused composition for blocks
    # this small (they go in one round of the all_gather), and its spans are the subject.
    env = dict(os.environ, COMMFUSE_ALGO="all_gather_matmul:fused")
    proc = subprocess.run(
        [cli(), "bench", "all-gather-matmul", "-n", str(world), "--m", str(8 * world),
         "--k", "256", "--n", "128", "--dtype", "bfloat16", "--transport", transport,
         "--rounds", "1", "--iters", "3", "--trace", str(trace)],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = ctrace.load(str(trace))
    summary = ctrace.check(events, world_size=world)
    # The fused op ran (warm-up + 3 timed calls) on every rank: one "op" span per call, and
    # per call one pack of this rank's rows and a compute per block (every rank's).
    calls = [e for e in ctrace.spans(events) if e["cat"] == "op"]
    assert {e["name"] for e in calls} == {"all_gather_matmul"}
    per_rank = {r: sum(1 for e in calls if e["pid"] == r) for r in range(world)}
    assert len(set(per_rank.values())) == 1 and per_rank[0] >= 4, per_rank
    assert summary["spans"]["compute"] >= world * per_rank[0] * world
    # Every piece span lies inside one of its rank's operator calls.
    for e in ctrace.spans(events):
        if e["name"] in ctrace.PIECE_SPANS:
            assert any(c["pid"] == e["pid"] and c["ts"] <= e["ts"] and e["end"] <= c["end"]
                       for c in calls), e
    shown = ctrace.window(events, op="all_gather_matmul")
    assert {e["pid"] for e in shown} == set(range(world))


def _trace_worker(rank, path):
    os.environ["COMMFUSE_TRACE"] = path  # read at the first span, in this process
    # The stream's pieces are the subject: the list would gather these 4-row blocks with
    # the unfused all_gather (they would be staged and multiplied once, nothing overlapping).
    os.environ["COMMFUSE_ALGO"] = "all_gather_matmul:fused"
    rng = np.random.default_rng(rank)
    x1 = rng.standard_normal((4, 64)).astype(np.float32)
    x2 = np.ones((64, 32), np.float32)
    with commfuse.init() as comm:
        out = commfuse.all_gather_base_mm(x1, x2, comm, comm.world_size)[0]
    return out.shape


def test_python_calls_are_traced(tmp_path):
    path = str(tmp_path / "py.json")
    shapes = commfuse.spawn(_trace_worker, (path,), nprocs=2)
    assert shapes == [(8, 32), (8, 32)]
    summary = ctrace.check(ctrace.load(path), world_size=2)
    assert summary["spans"]["all_gather_matmul"] == 2


def _write(tmp_path, events, closed=True):
    text = json.dumps(events)
    if not closed:
        text = text[:-1] + ","  # what a writer leaves: the format allows it
    p = tmp_path / "t.json"
    p.write_text(text)
    return str(p)


def _meta(world):
    return [{"name": "process_name", "ph": "M", "pid": r, "args": {"name": f"rank {r}"}}
            for r in range(world)]


def _span(name, ts, dur, pid=0, tid=7, cat="gather_stream"):
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def _pieces(pid):
    return [_span("all_gather_matmul", 0, 100, pid, cat="op"), _span("pack", 1, 10, pid),
            _span("wait", 12, 5, pid), _span("compute", 20, 50, pid),
            _span("gemm", 21, 40, pid, cat="row_gemm")]


def test_check_accepts_nested_spans_and_an_open_array(tmp_path):
    events = _meta(2) + _pieces(0) + _pieces(1)
    summary = ctrace.check(ctrace.load(_write(tmp_path, events, closed=False)), 2)
    assert summary["spans"] == {"all_gather_matmul": 2, "pack": 2, "wait": 2, "compute": 2,
                                "gemm": 2}
    assert summary["tracks"] == [(0, 7), (1, 7)]


@pytest.mark.parametrize("case,message", [
    ("partial_overlap", "overlaps 'compute'"),
    ("missing_track", "not one per rank"),
    ("foreign_pid", "not a rank of 2"),
    ("no_pieces", "has no wait/read/transfer spans"),
    ("negative", "negative duration"),
])
def test_check_rejects_malformed_traces(tmp_path, case, message):
    events = _meta(2) + _pieces(0) + _pieces(1)
    if case == "partial_overlap":
        events.append(_span("gemm", 65, 10, pid=1, cat="row_gemm"))  # 65..75 vs compute 20..70
    elif case == "missing_track":
        events = [e for e in events if not (e["ph"] == "M" and e["pid"] == 1)]
    elif case == "foreign_pid":
        events.append(_span("pack", 200, 1, pid=5))
    elif case == "no_pieces":
        events = [e for e in events if not (e["name"] == "wait" and e["pid"] == 1)]
    elif case == "negative":
        events.append(_span("pack", 300, -1, pid=0))
    with pytest.raises(ctrace.TraceError, match=message):
        ctrace.check(ctrace.load(_write(tmp_path, events)), 2)


_ONE_RANK_TRACED = """
import numpy as np, commfuse
with commfuse.init(0, 1, "tcp://127.0.0.1:{port}") as comm:
    comm.all_reduce(np.ones(16, np.float32))
print("done")
"""


def test_a_trace_that_cannot_be_written_is_said(tmp_path):
    # /dev/full takes the open and fails every write: the events had been dropped silently
    # (exit 0, no trace, no word). Paths refused outright are covered in test_spawn.py.
    env = dict(os.environ, COMMFUSE_TRACE="/dev/full")
    code = _ONE_RANK_TRACED.format(port=commfuse.free_port())
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert ("COMMFUSE_TRACE: writing /dev/full failed (No space left on device); tracing stops"
            in r.stderr), r.stderr
