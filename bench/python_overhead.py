#!/usr/bin/env python3
"""What a Python call of an operator costs over the C++ call, at the tiny shape where that
cost shows: all_gather_base_mm, 1 row per rank, k = n = 256, bfloat16, W ranks.

The C++ side is `commfuse bench all-gather-matmul`'s one-call function (`call_us`: plan,
workspace and execute in every call, as the Python wrapper does), run first; the Python
side times `commfuse.all_gather_base_mm` on numpy arrays (outputs preallocated) in
`commfuse.spawn`ed ranks: rounds of N calls, median round, mean over ranks.

usage: bench/python_overhead.py [--nprocs W] [--k K] [--n N] [--rounds R] [--json FILE]
       [--cli build/bin/commfuse]   (PYTHONPATH=build/python)
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def worker(rank: int, k: int, n: int, rounds: int, calls: int) -> list[float]:
    import ml_dtypes
    import numpy as np

    import commfuse

    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(rank)
    x1 = rng.standard_normal((1, k)).astype(bf16)
    x2 = (rng.standard_normal((k, n)) / 16).astype(bf16)
    with commfuse.init() as comm:
        w = comm.world_size
        out = np.empty((w, n), bf16)
        gather = np.empty((w, k), bf16)
        for _ in range(200):  # plans, pages, the wrapper's caches
            commfuse.all_gather_base_mm(x1, x2, comm, w, out=out, gather_out=gather)
        times = []
        for _ in range(rounds):
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                commfuse.all_gather_base_mm(x1, x2, comm, w, out=out, gather_out=gather)
            times.append((time.perf_counter() - t0) / calls * 1e6)
        return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--k", type=int, default=256)
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--json", help="append one JSON object with the result to this file")
    p.add_argument("--cli", default=os.environ.get("COMMFUSE_CLI",
                                                   str(REPO / "build" / "bin" / "commfuse")))
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as d:
        cj = os.path.join(d, "cpp.json")
        r = subprocess.run([a.cli, "bench", "all-gather-matmul", "-n", str(a.nprocs),
                            "--m", str(a.nprocs), "--k", str(a.k), "--n", str(a.n),
                            "--dtype", "bfloat16", "--rounds", str(a.rounds), "--json", cj],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print(r.stdout + r.stderr, file=sys.stderr)
            return 1
        cpp = json.loads(open(cj).read())

    import commfuse

    per_rank = commfuse.spawn(worker, (a.k, a.n, a.rounds, a.calls), nprocs=a.nprocs)
    rounds = [statistics.mean(t[i] for t in per_rank) for i in range(a.rounds)]
    py = statistics.median(rounds)
    row = {"op": "all_gather_matmul", "W": a.nprocs, "m": a.nprocs, "k": a.k, "n": a.n,
           "dtype": "bfloat16", "python_us": py, "python_us_min": min(rounds),
           "python_us_max": max(rounds), "cpp_call_us": cpp["call_us"],
           "cpp_execute_us": cpp["fused_us"], "overhead_us": py - cpp["call_us"],
           "python": sys.version.split()[0]}
    print(f"# all_gather_base_mm W={a.nprocs}, 1 row per rank, k={a.k} n={a.n} bfloat16: "
          f"Python {py:.1f} us ({min(rounds):.1f}-{max(rounds):.1f}), C++ one-call "
          f"{cpp['call_us']:.1f} us (plan made once: {cpp['fused_us']:.1f} us): "
          f"Python costs {py - cpp['call_us']:.1f} us more")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
