#!/usr/bin/env python3
"""commfuse against PyTorch's own CPU composition, in the same processes.

all_gather then matmul as a PyTorch user writes it — ``torch.distributed`` with the gloo
backend (``all_gather`` into row blocks of one tensor),
then ``torch.matmul`` (Debian's PyTorch multiplies fp32 with the system BLAS: OpenBLAS
when ``libopenblas0-pthread`` is installed, which scripts/install-torch-python.sh does) —
against ``commfuse.all_gather_base_mm`` on the same torch tensors. Variants alternate
within each round; the median round is reported, with its spread, as a mean over ranks.
Both sides get the same compute threads per rank (cores / W, as commfuse's default).

usage: bench/torch_baseline.py [--nprocs W] [--m M] [--k K] [--n N] [--dtype float32|bfloat16]
                               [--rounds R] [--json FILE]
Needs an interpreter with torch (e.g. build/torch-venv/bin/python after `make test-python`)
and commfuse importable (PYTHONPATH=build/python).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def worker(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    import commfuse

    w = args.nprocs
    threads = max(1, (os.cpu_count() or 1) // w)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=w)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    m = args.m // w
    gen = torch.Generator().manual_seed(1234 + rank)
    x1 = torch.randn(m, args.k, generator=gen).to(dtype)
    x2 = (torch.randn(args.k, args.n, generator=torch.Generator().manual_seed(7)) /
          args.k ** 0.5).to(dtype)
    gathered = torch.empty(args.m, args.k, dtype=dtype)
    out_torch = torch.empty(args.m, args.n, dtype=dtype)
    out_cf = torch.empty(args.m, args.n, dtype=dtype)
    gather_cf = torch.empty(args.m, args.k, dtype=dtype)
    # gloo in torch 1.13 has no _allgather_base (all_gather_into_tensor): all_gather into
    # views of one tensor, which is what torch users do there.
    blocks = list(gathered.chunk(w))

    def torch_way() -> None:
        dist.all_gather(blocks, x1)
        torch.matmul(gathered, x2, out=out_torch)

    with commfuse.init() as comm:
        def commfuse_way() -> None:
            commfuse.all_gather_base_mm(x1, x2, comm.name, w, out=out_cf, gather_out=gather_cf)

        variants = {"torch_gloo": torch_way, "commfuse": commfuse_way}
        for fn in variants.values():  # warm-up: plans, oneDNN primitives, gloo's buffers
            fn()
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, fn in variants.items():
                dist.barrier()
                comm.barrier()
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        # Same inputs, fp32 accumulation on both sides: the results agree to rounding.
        err = (out_cf.float() - out_torch.float()).abs().max().item()
        scale = out_torch.float().abs().max().item()
        wrong = int(not torch.equal(gather_cf, gathered)) + int(err > 1e-2 * max(scale, 1.0))
        with open(f"{out}.{rank}", "w") as f:
            json.dump({"times": times, "max_abs_diff": err, "wrong": wrong,
                       "threads": threads, "torch": torch.__version__,
                       "blas": torch.__config__.show().split("BLAS_INFO=")[1].split(",")[0]}, f)
    dist.destroy_process_group()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--m", type=int, default=2048, help="global rows (m / W per rank)")
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="append one JSON object with the result to this file")
    args = p.parse_args()
    if args.m % args.nprocs:
        p.error(f"--m {args.m} must be a multiple of --nprocs {args.nprocs}")

    import tempfile

    import commfuse

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r")
        commfuse.spawn(worker, (args, commfuse.free_port(), out), nprocs=args.nprocs)
        ranks = [json.load(open(f"{out}.{r}")) for r in range(args.nprocs)]
    med = {}
    for name in ranks[0]["times"]:
        per_round = [statistics.mean(r["times"][name][i] for r in ranks)
                     for i in range(args.rounds)]
        med[name] = (statistics.median(per_round), min(per_round), max(per_round))
    wrong = sum(r["wrong"] for r in ranks)
    print(f"# all_gather then matmul, W={args.nprocs}, global m={args.m} k={args.k} n={args.n} "
          f"{args.dtype}, {ranks[0]['threads']} threads per rank, torch {ranks[0]['torch']} "
          f"(BLAS_INFO={ranks[0]['blas']}), median of {args.rounds} rounds (min-max)")
    for name, (m, lo, hi) in med.items():
        print(f"{name:>12}: {m * 1e3:9.1f} ms  ({lo * 1e3:.1f}-{hi * 1e3:.1f})")
    ratio = med["commfuse"][0] / med["torch_gloo"][0]
    print(f"commfuse / torch_gloo: {ratio:.3f}   #wrong {wrong}   "
          f"max |diff| {max(r['max_abs_diff'] for r in ranks):.3g}")
    if args.json:
        with open(args.json, "a") as f:
            json.dump({"op": "all_gather_matmul", "W": args.nprocs, "m": args.m, "k": args.k,
                       "n": args.n, "dtype": args.dtype,
                       "ms": {k: v[0] * 1e3 for k, v in med.items()}, "ratio": ratio,
                       "wrong": wrong}, f)
            f.write("\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
