"""bench/run.py and bench/report.py with a failed case: its rows kept, meta.json and
REPORT.md name it (FAILED), and nothing is published. No benchmark runs: a fake `commfuse`
(a shell script) stands in for the CLI, and matplotlib is stubbed (no plot is looked at)."""

import importlib.util
import json
import pathlib
import sys
import types
from unittest import mock

REPO = pathlib.Path(__file__).resolve().parents[2]

# `commfuse info` prints a CPU line; `commfuse bench OP ... --json F` writes one row, and
# all-reduce exits 1 after writing it, as a benchmark that found a wrong result does.
FAKE_CLI = """#!/bin/sh
if [ "$1" = info ]; then echo "  CPU  fake"; exit 0; fi
json=""; prev=""
for a in "$@"; do [ "$prev" = "--json" ] && json="$a"; prev="$a"; done
echo '{"op":"'"$2"'","transport":"shm","world_size":2,"bytes":4096,"commfuse_us":1.0,"mpi_us":null,"busbw_gbs":1.0,"algbw_gbs":1.0,"wrong":7}' > "$json"
if [ "$2" = all-reduce ]; then echo "bench: 7 wrong elements" >&2; exit 1; fi
exit 0
"""


def load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    # report.py puts the source tree's python/ first on sys.path (for commfuse.trace when
    # run from a checkout): kept, it made later tests' spawned ranks import the unbuilt
    # package from there (test_trace: "cannot import name '_commfuse'").
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def stub_matplotlib(monkeypatch):
    mpl = types.ModuleType("matplotlib")
    mpl.use = lambda *a, **k: None
    plt = types.ModuleType("matplotlib.pyplot")
    plt.subplots = lambda *a, **k: (mock.MagicMock(), mock.MagicMock())
    plt.close = lambda *a, **k: None
    mpl.pyplot = plt
    monkeypatch.setitem(sys.modules, "matplotlib", mpl)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", plt)


def test_publish_refused_when_a_case_failed():
    run = load("run")
    ok, _ = run.publish_decision(False, False, None, set(), [])
    assert ok
    ok, why = run.publish_decision(False, False, None, set(), [{"case": "all-reduce W=2"}])
    assert not ok and "FAILED" in why


def test_failed_case_keeps_rows_and_is_recorded(tmp_path, monkeypatch, capsys):
    cli = tmp_path / "build" / "bin" / "commfuse"
    cli.parent.mkdir(parents=True)
    cli.write_text(FAKE_CLI)
    cli.chmod(0o755)
    out = tmp_path / "out"
    run = load("run")
    monkeypatch.setattr(run, "copy_bandwidth", lambda: None)  # a 256 MiB copy, not needed
    monkeypatch.setattr(run, "has_module", lambda name: False)  # no torch, no report step
    monkeypatch.setattr(sys, "argv", ["run.py", "--quick", "--build", str(tmp_path / "build"),
                                      "--out", str(out), "--only", "collectives"])
    assert run.main() == 1
    meta = json.loads((out / "meta.json").read_text())
    failed = meta["failed"]
    assert failed and all(f["case"].startswith("all-reduce") for f in failed)
    assert any("7 wrong elements" in f["error"] for f in failed)
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines() if x.strip()]
    bad = [r for r in rows if r.get("failed")]
    assert len(bad) == len(failed) and all(r["wrong"] == 7 for r in bad)
    assert any(not r.get("failed") for r in rows)  # the cases that passed are there too
    assert "# FAILED: collectives: all-reduce" in capsys.readouterr().out


def fused_row(case, schedule, fused_us):
    return {"section": "fused", "case": case, "rep": 0, "op": "all-gather-matmul",
            "transport": "shm", "world_size": 2, "dtype": "bfloat16", "m": 8, "k": 64, "n": 32,
            "fused_us": fused_us, "unfused_us": 100.0, "unfused_mpi_us": 110.0,
            "gemm_alone_us": 50.0, "exposed_comm": 0.5, "wrong": 0, "schedule": schedule}


def test_report_lists_failures_and_refuses_to_publish(tmp_path, monkeypatch):
    stub_matplotlib(monkeypatch)
    report = load("report")
    meta = {"date": "2026-01-01 00:00 UTC", "commit": "abc", "dirty": False,
            "command": "make bench", "reps": 1, "info": "  CPU  fake\n", "skipped": {},
            "failed": [{"section": "collectives", "case": "all-reduce W=2", "rep": 0,
                        "exit": 1, "error": "bench: 7 wrong elements"}]}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    rows = [fused_row("agm fused", "fused", 80.0), fused_row("agm list chose unfused", "unfused", 90.0)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    published = []
    monkeypatch.setattr(report, "publish", lambda *a: published.append(a))
    monkeypatch.setattr(sys, "argv", ["report.py", str(tmp_path), "--publish"])
    assert report.main() == 1
    assert not published
    text = (tmp_path / "REPORT.md").read_text()
    assert "**FAILED**: collectives: all-reduce W=2 (repetition 1, exit 1): bench: 7 wrong elements" in text
    # The case whose list ran the unfused algorithm is no fusion win, and says so.
    wins = next(line for line in text.splitlines() if line.startswith("**Where fused beats unfused**"))
    assert "agm fused" in wins and "agm list chose unfused" not in wins
    assert "**Ran unfused**" in text and "agm list chose unfused (0.900)" in text


def test_run_reads_the_core_to_core_probe_the_bench_printed():
    run = load("run")
    out = ("# core-to-core synchronization before the run: 0.031 us (commfuse info's probe)\n"
           "# commfuse bench all-reduce: 2 ranks\n"
           "# core-to-core synchronization after the run: 0.148 us\n")
    assert run.sync_probe(out) == {"sync_before_us": 0.031, "sync_after_us": 0.148}
    assert run.sync_probe("# core-to-core synchronization before the run: no run finished\n") == {}


def coll_row(case, rep, b, ratio, before, after):
    return {"section": "collectives", "case": case, "rep": rep, "op": "all-gather",
            "transport": "shm", "world_size": 2, "bytes": b, "commfuse_us": 1.0,
            "mpi_us": ratio, "busbw_gbs": 1.0, "algbw_gbs": 1.0, "wrong": 0,
            "sync_before_us": before, "sync_after_us": after}


def test_report_names_the_case_runs_in_slow_cross_core_minutes(tmp_path, monkeypatch):
    stub_matplotlib(monkeypatch)
    report = load("report")
    meta = {"date": "2026-01-01 00:00 UTC", "commit": "abc", "dirty": False,
            "command": "make bench", "reps": 2, "info": "  CPU  fake\n", "skipped": {},
            "failed": []}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    # all-gather W=2 ran its second repetition with the probe at 0.15 us (5x the lowest):
    # its median below the bar is starred; all-to-all's was measured in quiet minutes.
    rows = [coll_row("all-gather W=2", 0, 65536, 0.9, 0.03, 0.031),
            coll_row("all-gather W=2", 1, 65536, 0.4, 0.15, 0.032),
            coll_row("all-to-all W=2", 0, 64, 0.95, 0.03, 0.035),
            coll_row("all-to-all W=2", 1, 64, 0.85, 0.032, 0.031)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(sys, "argv", ["report.py", str(tmp_path)])
    assert report.main() == 0
    text = (tmp_path / "REPORT.md").read_text()
    state = next(line for line in text.splitlines() if line.startswith("- **Machine state**"))
    assert "lowest 0.031 us" in state and "1 of 4 case runs read over 3x the lowest" in state
    assert "all-gather W=2 (rep 2) 0.150" in state
    medians = next(line for line in text.splitlines()
                   if line.startswith("- **Collectives vs OpenMPI, medians** (shared memory"))
    assert "all-gather W=2 64K B 0.650*" in medians and "all-to-all W=2 64 B 0.900)" in medians
    assert "* a repetition of that case ran in slow cross-core minutes" in medians
