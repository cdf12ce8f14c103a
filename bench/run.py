#!/usr/bin/env python3
"""`make bench` (and `make bench QUICK=1`): every operator and collective benchmark over a
grid of shapes, dtypes and world sizes, on shared memory, on MPI over TCP, on a simulated
rate-limited network and against PyTorch + gloo, then the report.

Each case is one `commfuse bench ...` (or bench/torch_baseline.py) run; the grid runs
--reps times (case order repeated, so slow drift of a shared machine spreads over every
case). Rows stream into <out>/rows.jsonl as they finish, each annotated with its case,
section and repetition; <out>/meta.json records the machine (`commfuse info`), commit,
command and versions. Then bench/report.py writes <out>/REPORT.md and its plots; a full
run also refreshes the committed bench/REPORT.md, bench/report/*.png and the README's
performance section.

usage: bench/run.py [--quick] [--build DIR] [--out DIR] [--reps N] [--only SECTION[,...]]
                    [--skip SECTION[,...]] [--no-publish]
Run with an interpreter that has torch and matplotlib (scripts/install-bench-deps.sh prints
one); the torch and report steps are skipped, saying why, when it lacks them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

REPO = pathlib.Path(__file__).resolve().parents[1]
# Sections run by a Python script of bench/ (the others by `commfuse bench`).
SCRIPTS = {"torch": "torch_baseline.py", "python": "python_overhead.py"}


@dataclass
class Case:
    section: str  # collectives, fused, quantized, alltoall, quant_reduce, torch, netns, trace
    name: str
    args: list[str]  # `commfuse bench` arguments, or torch_baseline.py's for section torch
    rate: Optional[str] = None  # netns: the link rate the case runs at
    annotate: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)  # extra environment (the ISA-capped cases)


def grid(quick: bool) -> list[Case]:
    """The benchmark grid. QUICK: the same sections at smaller sizes, one world size per
    family where the full run has three, so the whole run fits in about 3 minutes."""
    cases: list[Case] = []

    def add(section, name, *args, **kw):
        cases.append(Case(section, name, [str(a) for a in args], **kw))

    # Collectives vs OpenMPI, shared memory (W = 2, 3, 4, 8) and TCP (W = 2).
    top = "4M" if quick else "64M"
    step = "16" if quick else "4"
    worlds = [2] if quick else [2, 3, 4, 8]
    for w in worlds:
        ops = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]
        if w == 8:  # 8 ranks on 2 cores: the most used one, up to 16 MiB
            ops = ["all-reduce"]
        for op in ops:
            add("collectives", f"{op} W={w}", op, "-n", w, "-b", 64,
                "-e", "16M" if w == 8 else top, "-f", step, "--rounds", 3)
    if not quick:
        # bfloat16 (issue 13): OpenMPI moves the bits of all_gather / all_to_all alike, but
        # cannot sum bfloat16 (the all-reduce row is ours alone).
        for op in ["all-reduce", "all-gather", "all-to-all"]:
            add("collectives", f"{op} bf16 W=2", op, "-n", 2, "-b", 64, "-e", top,
                "-f", step, "--dtype", "bfloat16", "--rounds", 3)
    for op in ["all-reduce"] if quick else ["all-reduce", "all-gather", "reduce-scatter",
                                             "all-to-all"]:
        add("collectives", f"{op} W=2 tcp", op, "-n", 2, "-b", 64,
            "-e", "1M" if quick else "16M", "-f", step, "--transport", "mpi", "--rounds", 3)

    # Fused matmul operators vs their unfused composition and the GEMM alone.
    big = (1024, 2048, 2048) if quick else (2048, 4096, 4096)
    shapes = [("prefill", *big), ("decode", 16, 4096, 4096), ("tiny", 2, 256, 256)]
    if quick:
        shapes = shapes[:1] + shapes[2:]
    for op in ["all-gather-matmul", "matmul-reduce-scatter", "matmul-all-reduce"]:
        for label, m, k, n in shapes:
            add("fused", f"{op} {label} bf16 W=2", op, "-n", 2, "--m", m, "--k", k, "--n", n,
                "--dtype", "bfloat16", "--rounds", 3, annotate={"shape": label})
    if not quick:
        add("fused", "all-gather-matmul prefill fp32 W=2", "all-gather-matmul", "-n", 2,
            "--m", 2048, "--k", 4096, "--n", 4096, "--dtype", "float32", "--rounds", 3,
            annotate={"shape": "prefill"})
        # all_gather_matmul's GEMM covers every rank's rows: half the rows keep it as long
        # as the reducing ops' at W=4 on 2 cores.
        for op in ["all-gather-matmul", "matmul-reduce-scatter", "matmul-all-reduce"]:
            m4 = 1024 if op == "all-gather-matmul" else 2048
            add("fused", f"{op} prefill bf16 W=4", op, "-n", 4, "--m", m4, "--k", 4096,
                "--n", 4096, "--dtype", "bfloat16", "--rounds", 3, annotate={"shape": "prefill"})
        # W=8 (8 ranks on the cores there are): the per-call shapes, 8 and 1 rows per rank.
        for label, m, k, n in [("decode", 64, 4096, 4096), ("tiny", 8, 256, 256)]:
            add("fused", f"all-gather-matmul {label} bf16 W=8", "all-gather-matmul", "-n", 8,
                "--m", m, "--k", k, "--n", n, "--dtype", "bfloat16", "--rounds", 3,
                annotate={"shape": label})
    # The same W=2 shapes with commfuse's kernel choices (and oneDNN's) held to AVX2: the
    # paths of a CPU without AVX-512, VNNI or AMX (bf16 widened to fp32, the exact
    # f32-blocked int8 GEMM), measured on this one (issue 12 asks for both).
    if not quick:
        capped = {"COMMFUSE_MAX_CPU_ISA": "avx2"}
        for op in ["all-gather-matmul", "matmul-reduce-scatter", "matmul-all-reduce"]:
            for label, m, k, n in shapes:
                add("fused", f"{op} {label} bf16 W=2 avx2", op, "-n", 2, "--m", m, "--k", k,
                    "--n", n, "--dtype", "bfloat16", "--rounds", 3,
                    annotate={"shape": label, "isa": "avx2"}, env=capped)
    add("fused", "all-gather-matmul tcp bf16 W=2", "all-gather-matmul", "-n", 2,
        "--m", 2048 if quick else 4096, "--k", 4096, "--n", 64, "--dtype", "bfloat16",
        "--transport", "mpi", "--rounds", 3, annotate={"shape": "tcp"})

    # Quantized tensor parallelism (SPEC §6) vs its unfused composition and the bf16 op.
    qdtypes = ["int8"] if quick else ["int8", "float8_e4m3fn", "hifloat8"]
    qops = ["all-gather-matmul"] if quick else ["all-gather-matmul", "matmul-reduce-scatter",
                                                 "matmul-all-reduce"]
    for op in qops:
        for dt in qdtypes if op == "all-gather-matmul" else ["int8"]:
            add("quantized", f"{op} prefill {dt} W=2", op, "-n", 2, "--m", big[0], "--k", big[1],
                "--n", big[2], "--dtype", dt, "--rounds", 3, annotate={"shape": "prefill"})
    for dt in ["int8"] if quick else ["int8", "float8_e4m3fn"]:
        add("quantized", f"all-gather-matmul tcp {dt} W=2", "all-gather-matmul", "-n", 2,
            "--m", 2048 if quick else 4096, "--k", 4096, "--n", 64, "--dtype", dt,
            "--transport", "mpi", "--rounds", 3, annotate={"shape": "tcp"})

    # All-to-all + (quantized) matmul, the expert-parallel ops.
    bs, h, n = (1024, 1024, 2048) if quick else (4096, 2048, 4096)
    for combo in ["a16w8"] if quick else ["a16w8", "a16w4", "a4w4"]:
        add("alltoall", f"alltoall-quant-matmul {combo} W=2", "alltoall-quant-matmul", "-n", 2,
            "--bs", bs, "--h", h, "--n", n, "--combo", combo, "--rounds", 3)
    add("alltoall", "alltoall-matmul bf16 W=2", "alltoall-matmul", "-n", 2, "--bs", bs,
        "--h", h, "--n", n, "--rounds", 3)
    if not quick:  # the exact f32-blocked int8 GEMM of CPUs without VNNI or AMX
        add("alltoall", "alltoall-quant-matmul a16w8 W=2 avx2", "alltoall-quant-matmul", "-n", 2,
            "--bs", bs, "--h", h, "--n", n, "--combo", "a16w8", "--rounds", 3,
            annotate={"isa": "avx2"}, env={"COMMFUSE_MAX_CPU_ISA": "avx2"})

    # Quantized reductions vs MPI float32 and our own bf16/fp32 all-reduce.
    qtop = "4M" if quick else "16M"
    for w in [2] if quick else [2, 4, 8]:
        add("quant_reduce", f"quant-all-reduce int8 W={w}", "quant-all-reduce", "-n", w,
            "-b", "16K", "-e", "4M" if w == 8 else qtop, "-f", 4, "--rounds", 3)
    if not quick:
        add("quant_reduce", "quant-all-reduce e4m3 mx W=2", "quant-all-reduce", "-n", 2,
            "-b", "16K", "-e", qtop, "-f", 4, "--dtype", "float8_e4m3fn", "--scales", "mx",
            "--rounds", 3)
        add("quant_reduce", "quant-reduce-scatter int8 W=2", "quant-reduce-scatter", "-n", 2,
            "-b", "16K", "-e", qtop, "-f", 4, "--rounds", 3)
    add("quant_reduce", "quant-all-reduce int8 W=2 tcp", "quant-all-reduce", "-n", 2,
        "-b", "16K", "-e", "1M" if quick else "4M", "-f", 4, "--transport", "mpi",
        "--rounds", 3)

    # PyTorch (torch.distributed + gloo) doing the same work, in the same run.
    tm, tk, tn = (1024, 2048, 2048) if quick else (2048, 4096, 4096)
    torch_ops = [("all_gather_matmul", "float32"), ("quant_all_reduce", "int8")]
    if not quick:
        torch_ops = [("all_gather_matmul", "float32"), ("all_gather_matmul", "bfloat16"),
                     ("matmul_reduce_scatter", "float32"), ("matmul_all_reduce", "float32"),
                     ("quant_all_reduce", "int8")]
    for op, dt in torch_ops:
        qm, qk = (tm * 2, tk) if op == "quant_all_reduce" else (tm, tk)  # 4 / 16 Mi elements
        add("torch", f"{op} {dt} W=2", "--op", op, "--nprocs", 2, "--m", qm, "--k", qk,
            "--n", tn, "--dtype", "float32" if dt == "int8" else dt, "--rounds", 3)

    # What a Python call costs over the C++ one, at the tiny shape where it shows.
    add("python", "all_gather_base_mm tiny bf16 W=2", "--nprocs", 2, "--rounds", 5,
        "--calls", 1000 if quick else 3000)

    # A simulated network: ranks in namespaces joined by rate-limited links, at shapes where
    # the transfer and the GEMM take similar time (16 MiB per rank each way: 13 ms at
    # 10 Gbit/s), so the link, not the GEMM, decides.
    for rate in ["10gbit"] if quick else ["10gbit", "25gbit"]:
        for dt in ["bfloat16", "int8"]:
            add("netns", f"all-gather-matmul {dt} W=2 @{rate}", "all-gather-matmul", "-n", 2,
                "--m", 2048 if quick else 4096, "--k", 4096, "--n", 64, "--dtype", dt,
                "--transport", "mpi", "--rounds", 3, rate=rate)
        if not quick:
            add("netns", f"matmul-reduce-scatter bf16 W=2 @{rate}", "matmul-reduce-scatter",
                "-n", 2, "--m", 4096, "--k", 512, "--n", 1024, "--dtype", "bfloat16",
                "--transport", "mpi", "--rounds", 3, rate=rate)
        add("netns", f"quant-all-reduce int8 W=2 @{rate}", "quant-all-reduce", "-n", 2,
            "-b", "64K", "-e", "4M", "-f", 4, "--transport", "mpi", "--rounds", 3, rate=rate)
    return cases


def run(cmd: list[str], timeout: float, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def git(*args: str) -> str:
    try:
        return run(["git", "-C", str(REPO), *args], 30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def copy_bandwidth() -> Optional[float]:
    """GB/s of a one-thread 256 MiB memory copy (bytes read + written), best of 5: the
    reference for what a copy-bound collective could reach on this machine."""
    try:
        import numpy as np
    except ImportError:
        return None
    a = np.ones(1 << 26, np.float32)
    b = np.empty_like(a)
    best = None
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return 2 * a.nbytes / best / 1e9


def has_module(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None


class Progress:
    """One line per finished case; on a terminal also a live line with the elapsed time and
    an estimate of what is left."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.tty = sys.stderr.isatty()

    def begin(self, what: str) -> None:
        if self.tty:
            el = time.monotonic() - self.start
            eta = el / self.done * (self.total - self.done) if self.done else 0
            sys.stderr.write(f"\r\x1b[K[{self.done + 1}/{self.total}] {what}  "
                             f"({el:.0f} s{f', ~{eta:.0f} s left' if self.done else ''})")
            sys.stderr.flush()

    def end(self, line: str) -> None:
        self.done += 1
        if self.tty:
            sys.stderr.write("\r\x1b[K")
        el = time.monotonic() - self.start
        print(f"[{self.done}/{self.total} {el:5.0f}s] {line}", flush=True)


def summarize(row: dict) -> str:
    """A short line for the progress output: the headline ratio of a row."""
    try:
        return _summarize(row)
    except (KeyError, TypeError, ZeroDivisionError):  # a column this row does not have
        return json.dumps(row)[:160]


def _summarize(row: dict) -> str:
    op = row.get("op", "")
    if "busbw_gbs" in row:
        r = row["mpi_us"] / row["commfuse_us"] if row.get("mpi_us") else None
        return (f"{row['bytes']:>10} B  {row['commfuse_us']:9.1f} us  "
                f"OpenMPI/commfuse {r:.2f}" if r else f"{row['bytes']:>10} B")
    if "gemm_alone_us" in row:
        return (f"fused {row['fused_us'] / 1e3:.2f} ms, fused/unfused "
                f"{row['fused_us'] / row['unfused_us']:.3f}, fused/GEMM "
                f"{row['fused_us'] / row['gemm_alone_us']:.3f}")
    if "bf16_fused_us" in row:
        return (f"{row['dtype']} fused {row['fused_us'] / 1e3:.2f} ms, /unfused "
                f"{row['fused_us'] / row['unfused_us']:.3f}, /bf16 op "
                f"{row['fused_us'] / row['bf16_fused_us']:.3f}")
    if "half_path_us" in row or "bf16_path_us" in row:  # bf16_path_us: rows before 2026-12-08
        u = row.get("unfused_quant_us")
        half = row.get("half_path_us", row.get("bf16_path_us"))
        return (f"{op} {row['combo']} fused {row['fused_us'] / 1e3:.1f} ms"
                + (f", /unfused {row['fused_us'] / u:.3f}" if u else "")
                + (f", /{row.get('half_path_dtype', 'bfloat16')} path {row['fused_us'] / half:.3f}"
                   if half else "")
                + (f", /MPI path {row['fused_us'] / row['mpi_path_us']:.3f}"
                   if row.get("mpi_path_us") else ""))
    if "mpi_fp32_us" in row:
        return (f"{row['elements']:>9} el  {row['fused_us']:9.1f} us  MPI fp32/quant "
                f"{row['mpi_fp32_us'] / row['fused_us']:.2f}")
    if "overhead_us" in row:
        return (f"Python {row['python_us']:.1f} us, C++ call {row['cpp_call_us']:.1f} us: "
                f"+{row['overhead_us']:.1f} us")
    if "ratio" in row:
        return f"commfuse/torch {row['ratio']:.3f}  ({row['ms']['commfuse']:.1f} vs " \
               f"{row['ms']['torch_gloo']:.1f} ms)"
    return json.dumps(row)[:100]


def publish_decision(quick: bool, no_publish: bool, only, skip, failed: list) -> tuple[bool, str]:
    """Whether a run refreshes the committed report, and if not why. A run with a failed case
    never does: its report would miss that case's numbers (or show rows a wrong result
    wrote) under the committed report's name."""
    if quick or no_publish or only is not None or skip:
        return False, "not a full run (QUICK, --no-publish, --only or --skip)"
    if failed:
        return False, f"{len(failed)} case(s) FAILED (meta.json 'failed', REPORT.md)"
    return True, ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small grid, one repetition (~3 min)")
    p.add_argument("--build", default=str(REPO / "build"), help="build directory (bin/commfuse)")
    p.add_argument("--out", help="results directory (default bench/results/<time>[-quick])")
    p.add_argument("--reps", type=int, help="repetitions of the grid (default 3, quick 1)")
    p.add_argument("--only", help="comma-separated sections to run")
    p.add_argument("--skip", help="comma-separated sections to leave out")
    p.add_argument("--no-publish", action="store_true",
                   help="a full run: do not refresh bench/REPORT.md, bench/report/, README")
    a = p.parse_args()
    reps = a.reps or (1 if a.quick else 3)
    exe = pathlib.Path(a.build) / "bin" / "commfuse"
    if not os.access(exe, os.X_OK):
        p.error(f"{exe} not found: build first (make build)")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(a.out or REPO / "bench" / "results" / (stamp + ("-quick" if a.quick else "")))
    out.mkdir(parents=True, exist_ok=True)
    cases = grid(a.quick)
    sections = sorted({c.section for c in cases} | {"trace"})
    for opt in (a.only, a.skip):
        for s in (opt or "").split(","):
            if s and s not in sections:
                p.error(f"unknown section '{s}' (sections: {', '.join(sections)})")
    only = set(a.only.split(",")) if a.only else None
    skip = set(a.skip.split(",")) if a.skip else set()
    chosen = lambda s: (only is None or s in only) and s not in skip  # noqa: E731
    cases = [c for c in cases if chosen(c.section)]

    skipped: dict[str, str] = {}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in [str(pathlib.Path(a.build) / "python"),
                                                     env.get("PYTHONPATH")] if x)
    env["COMMFUSE_CLI"] = str(exe)
    if any(c.section == "torch" for c in cases) and not has_module("torch"):
        skipped["torch"] = f"{sys.executable} has no torch (scripts/install-bench-deps.sh)"
    if any(c.section == "netns" for c in cases):
        chk = run([str(REPO / "bench" / "netns.sh"), "check"], 60)
        if chk.returncode != 0:
            skipped["netns"] = chk.stderr.strip() or "network namespaces unavailable"
    cases = [c for c in cases if c.section not in skipped]

    info = run([str(exe), "info"], 120).stdout
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git("rev-parse", "--short=12", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "command": "make bench" + (" QUICK=1" if a.quick else ""),
        "argv": " ".join(shlex.quote(x) for x in sys.argv),
        "quick": a.quick, "reps": reps, "info": info, "skipped": skipped,
        "python": sys.version.split()[0], "membw_gbs": copy_bandwidth(),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    for line in info.splitlines():
        if line.strip().startswith(("CPU ", "CPU ISA", "oneDNN ISA")):
            print("#", line.strip())
    for s, why in skipped.items():
        print(f"# section {s} skipped: {why}")

    total = len(cases) * reps + (1 if chosen("trace") else 0)
    prog = Progress(total)
    rows_path = out / "rows.jsonl"
    # Every failed case (nonzero exit, timeout, no rows), recorded in meta.json as it happens
    # so that the report lists it even when the run is interrupted.
    failed: list[dict] = []

    def record_failure(c_section: str, c_name: str, rep: int, rc: int, err: str) -> None:
        failed.append({"section": c_section, "case": c_name, "rep": rep, "exit": rc,
                       "error": err.strip().splitlines()[-1] if err.strip() else ""})
        meta["failed"] = failed
        (out / "meta.json").write_text(json.dumps(meta, indent=1))
    netns_env: dict[str, str] = {}
    netns_rate: Optional[str] = None
    try:
        with open(rows_path, "a") as rows_file:
            for rep in range(reps):
                for c in cases:
                    prog.begin(f"{c.section}: {c.name} (rep {rep + 1}/{reps})")
                    with tempfile.NamedTemporaryFile(suffix=".json", dir=out, delete=False) as t:
                        jpath = t.name
                    cenv = dict(env, **c.env) if c.env else env
                    if c.section in SCRIPTS:
                        cmd = [sys.executable, str(REPO / "bench" / SCRIPTS[c.section]), *c.args,
                               "--json", jpath]
                    else:
                        cmd = [str(exe), "bench", *c.args, "--json", jpath]
                    if c.rate:
                        if not netns_env:
                            up = run([str(REPO / "bench" / "netns.sh"), "up", "2", c.rate], 60)
                            if up.returncode != 0:
                                raise RuntimeError(f"netns.sh up failed: {up.stderr}")
                            netns_env = _exports(up.stdout)
                            netns_rate = c.rate
                        elif netns_rate != c.rate:
                            rt = run([str(REPO / "bench" / "netns.sh"), "rate", c.rate], 60)
                            if rt.returncode != 0:
                                raise RuntimeError(f"netns.sh rate failed: {rt.stderr}")
                            netns_env.update(_exports(rt.stdout))
                            netns_rate = c.rate
                        cenv = dict(env, **netns_env)
                        cmd += ["--netns", netns_env["CF_NETNS"]]
                    t0 = time.monotonic()
                    try:
                        r = run(cmd, 900, cenv)
                        rc, err, printed = r.returncode, r.stderr, r.stdout
                    except subprocess.TimeoutExpired:
                        rc, err, printed = -1, "timed out after 900 s", ""
                    rows = []
                    if os.path.exists(jpath):
                        rows = [json.loads(x) for x in open(jpath) if x.strip()]
                        os.unlink(jpath)
                    if rc != 0 or not rows:
                        # The rows it wrote are kept (marked failed): a benchmark that found a
                        # wrong result exits 1 after writing its row, whose #wrong says so.
                        record_failure(c.section, c.name, rep, rc,
                                       err if err.strip() else "no rows written")
                        prog.end(f"{c.section}: {c.name}: FAILED (exit {rc}): "
                                 f"{failed[-1]['error']}")
                    probe = sync_probe(printed)
                    for row in rows:
                        row.update(case=c.name, section=c.section, rep=rep, **c.annotate, **probe)
                        if rc != 0:
                            row["failed"] = True
                        if c.rate:
                            row.update(netns_rate=c.rate,
                                       netns_qdisc=netns_env.get("CF_NETNS_QDISC"))
                        rows_file.write(json.dumps(row) + "\n")
                    rows_file.flush()
                    if rc == 0 and rows:
                        prog.end(f"{c.section}: {c.name}: {summarize(rows[-1])}  "
                                 f"[{time.monotonic() - t0:.0f} s]")
            if chosen("trace"):
                # Over TCP, where the pieces take long enough to see them arrive and be
                # worked on while the next is in flight.
                prog.begin("trace: all-gather-matmul bf16 W=2 tcp")
                tr = out / "trace.json"
                tcfg = {"file": tr.name, "world_size": 2, "m": 1024 if a.quick else 2048,
                        "k": 4096, "n": 1024, "dtype": "bfloat16", "comm_turn": 4,
                        "transport": "mpi"}
                r = run([str(exe), "bench", "all-gather-matmul", "-n", "2", "--m", str(tcfg["m"]),
                         "--k", "4096", "--n", "1024", "--dtype", "bfloat16", "--transport", "mpi",
                         "--rounds", "1", "--iters", "2", "--comm-turn", "4", "--trace", str(tr)],
                        600,
                        # Its pieces are the subject: at this shape (x2 not in cache) the list
                        # runs the unfused all_gather, which has none.
                        env=dict(os.environ, COMMFUSE_ALGO="all_gather_matmul:fused"))
                ok = r.returncode == 0 and tr.exists()
                if not ok:
                    record_failure("trace", "all-gather-matmul bf16 W=2 tcp", 0, r.returncode,
                                   r.stderr or "no trace written")
                meta["trace"] = tcfg if ok else None
                (out / "meta.json").write_text(json.dumps(meta, indent=1))
                prog.end(f"trace: {'written to ' + str(tr) if ok else 'FAILED: ' + r.stderr[-200:]}")
    finally:
        if netns_env:
            run([str(REPO / "bench" / "netns.sh"), "down"], 60)

    print(f"# rows: {rows_path}")
    for f in failed:
        print(f"# FAILED: {f['section']}: {f['case']} (rep {f['rep'] + 1}, exit {f['exit']}): "
              f"{f['error']}")
    rc = 1 if failed else 0
    publish, why_not = publish_decision(a.quick, a.no_publish, only, skip, failed)
    if failed and why_not:
        print(f"# not published: {why_not}")
    if not has_module("matplotlib"):
        print(f"# report not written: {sys.executable} has no matplotlib "
              "(scripts/install-bench-deps.sh)")
        return 1
    cmd = [sys.executable, str(REPO / "bench" / "report.py"), str(out)]
    if publish:
        cmd.append("--publish")
    r = subprocess.run(cmd)
    return rc or r.returncode


def sync_probe(stdout: str) -> dict[str, float]:
    """`commfuse bench`'s core-to-core probe before and after its run (us), where it printed
    one: a VM's slow cross-core minutes show there (bench/README.md)."""
    probe = {}
    for when in ("before", "after"):
        m = re.search(rf"^# core-to-core synchronization {when} the run: ([0-9.]+) us", stdout, re.M)
        if m:
            probe[f"sync_{when}_us"] = float(m.group(1))
    return probe


def _exports(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    return env


if __name__ == "__main__":
    sys.exit(main())
