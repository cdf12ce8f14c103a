#!/usr/bin/env python3
"""commfuse against PyTorch's own CPU composition, in the same processes.

Each op as a PyTorch user writes it with ``torch.distributed`` (gloo backend), against the
commfuse op on the same torch tensors:
  all_gather_matmul      all_gather into row blocks of one tensor, then ``torch.matmul``
  matmul_reduce_scatter  ``torch.matmul``, then all_reduce, keeping this rank's rows (gloo in
                         torch 1.13 has no reduce_scatter)
  matmul_all_reduce      ``torch.matmul``, then all_reduce
  quant_all_reduce       dequantize int8 (float32 scale per 128 elements), then all_reduce
                         float32 (PyTorch has no quantized all-reduce)
Debian's PyTorch multiplies fp32 with the system BLAS: OpenBLAS when
``libopenblas0-pthread`` is installed, which scripts/install-torch-python.sh does. Variants
alternate within each round; the median round is reported, with its spread, as a mean over
ranks. Both sides get the same compute threads per rank (cores / W, as commfuse's default).

usage: bench/torch_baseline.py [--op OP] [--nprocs W] [--m M] [--k K] [--n N]
                               [--dtype float32|bfloat16] [--rounds R] [--json FILE]
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

OPS = ["all_gather_matmul", "matmul_reduce_scatter", "matmul_all_reduce", "quant_all_reduce"]


def _setup(op: str, rank: int, args: argparse.Namespace, dist, torch, commfuse, comm):
    """Inputs, the PyTorch way and the commfuse way of one op; returns (torch_way,
    commfuse_way, compare, torch_desc). compare() -> (max |diff|, wrong)."""
    w = args.nprocs
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    gen = torch.Generator().manual_seed(1234 + rank)
    if op == "quant_all_reduce":
        # Per-token-group int8 (a float32 scale per 128 elements) as a quantized gradient
        # or activation all-reduce carries it. PyTorch has no quantized all-reduce: it
        # dequantizes, then all-reduces float32.
        rows, h = args.m // w * w, args.k
        x = torch.randint(-127, 128, (rows, h), generator=gen, dtype=torch.int8)
        scales = torch.rand(rows, h // 128, generator=gen) * 0.01 + 0.001
        deq = torch.empty(rows, h)
        out_cf = torch.empty(rows, h)

        def torch_way() -> None:
            torch.mul(x.view(rows, h // 128, 128).float(), scales.unsqueeze(-1),
                      out=deq.view(rows, h // 128, 128))
            dist.all_reduce(deq)

        def commfuse_way() -> None:
            commfuse.quant_all_reduce(x, scales, comm, out=out_cf)

        def compare():
            err = (out_cf - deq).abs().max().item()
            # Different summation orders (gloo's ring vs rank order): rounding only. Written
            # `not (err <= tol)` so that a NaN anywhere (torch's max propagates it) counts as
            # wrong: `err > tol` is False for NaN.
            return err, int(not (err <= 1e-5 * max(deq.abs().max().item(), 1.0)))

        return torch_way, commfuse_way, compare, "dequantize, then all_reduce float32"

    x2 = (torch.randn(args.k if op == "all_gather_matmul" else args.k // w, args.n,
                      generator=torch.Generator().manual_seed(7 + rank)) / args.k ** 0.5).to(dtype)
    if op == "all_gather_matmul":
        x1 = torch.randn(args.m // w, args.k, generator=gen).to(dtype)
        gathered = torch.empty(args.m, args.k, dtype=dtype)
        out_torch = torch.empty(args.m, args.n, dtype=dtype)
        out_cf = torch.empty(args.m, args.n, dtype=dtype)
        gather_cf = torch.empty(args.m, args.k, dtype=dtype)
        # gloo in torch 1.13 has no _allgather_base (all_gather_into_tensor): all_gather into
        # views of one tensor, which is what torch users do there.
        blocks = list(gathered.chunk(w))
        # gloo cannot move bfloat16 (nor int16) either ("Invalid scalar type"): a user
        # gathers the bits as float16, which gloo only copies (exact).
        bits = (lambda t: t.view(torch.float16)) if dtype == torch.bfloat16 else (lambda t: t)
        send, recv = bits(x1), [bits(b) for b in blocks]

        def torch_way() -> None:
            dist.all_gather(recv, send)
            torch.matmul(gathered, x2, out=out_torch)

        def commfuse_way() -> None:
            commfuse.all_gather_base_mm(x1, x2, comm.name, w, out=out_cf, gather_out=gather_cf)

        def compare():
            err = (out_cf.float() - out_torch.float()).abs().max().item()
            scale = out_torch.float().abs().max().item()
            return err, int(not torch.equal(gather_cf, gathered)) + int(not (err <= 1e-2 * max(scale, 1.0)))

        return torch_way, commfuse_way, compare, ("all_gather, then matmul" if dtype == torch.float32
                                                  else "all_gather (the bits as float16: gloo "
                                                  "cannot move bfloat16), then matmul")

    # matmul_reduce_scatter / matmul_all_reduce: each rank holds k/W columns of x1 and rows
    # of x2 (tensor parallelism's row-parallel layer); the partial products are summed.
    x1 = torch.randn(args.m, args.k // w, generator=gen).to(dtype)
    partial = torch.empty(args.m, args.n, dtype=dtype)
    rows = args.m // w if op == "matmul_reduce_scatter" else args.m
    out_cf = torch.empty(rows, args.n, dtype=dtype)
    # gloo in torch 1.13 implements neither reduce_scatter nor its _base form: a gloo user
    # all-reduces and keeps their rows.
    desc = ("matmul, then all_reduce and keep this rank's rows" if op == "matmul_reduce_scatter"
            else "matmul, then all_reduce")
    # gloo cannot sum bfloat16 (torch 1.13: "Invalid scalar type"): a user sums in float32.
    summed = partial if dtype == torch.float32 else torch.empty(args.m, args.n)
    if dtype != torch.float32:
        desc = desc.replace("all_reduce", "all_reduce (as float32: gloo cannot sum bfloat16)")
    mine = summed[rank * rows:(rank + 1) * rows] if op == "matmul_reduce_scatter" else summed

    def torch_way() -> None:
        torch.matmul(x1, x2, out=partial)
        if summed is not partial:
            summed.copy_(partial)
        dist.all_reduce(summed)

    if op == "matmul_reduce_scatter":
        def commfuse_way() -> None:
            commfuse.mm_reduce_scatter_base(x1, x2, comm.name, w, out=out_cf)
    else:
        def commfuse_way() -> None:
            commfuse.mm_all_reduce_base(x1, x2, comm.name, out=out_cf)

    def compare():
        err = (out_cf.float() - mine.float()).abs().max().item()
        scale = mine.float().abs().max().item()
        # bf16 outputs: torch rounds each partial product to bf16 before summing them.
        tol = (3e-2 if dtype == torch.bfloat16 else 1e-3) * max(scale, 1.0)
        return err, int(not (err <= tol))

    return torch_way, commfuse_way, compare, desc


def worker(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    import commfuse

    w = args.nprocs
    threads = max(1, (os.cpu_count() or 1) // w)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=w)
    with commfuse.init() as comm:
        torch_way, commfuse_way, compare, desc = _setup(args.op, rank, args, dist, torch,
                                                         commfuse, comm)
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
        err, wrong = compare()
        # BLAS_INFO says "generic" for Debian's build: the BLAS actually loaded is whatever
        # the libblas.so.3 alternative points at.
        with open("/proc/self/maps") as maps:
            blas_libs = sorted({line.split()[-1].rsplit("/", 1)[-1] for line in maps
                                if "blas" in line.rsplit("/", 1)[-1]})
        with open(f"{out}.{rank}", "w") as f:
            json.dump({"times": times, "max_abs_diff": err, "wrong": wrong, "torch_way": desc,
                       "threads": threads, "torch": torch.__version__,
                       "blas": torch.__config__.show().split("BLAS_INFO=")[1].split(",")[0]
                       + (f" ({', '.join(blas_libs)})" if blas_libs else "")}, f)
    dist.destroy_process_group()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", default="all_gather_matmul", choices=OPS)
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--m", type=int, default=2048,
                   help="all_gather_matmul: global rows (m / W per rank); matmul_*: every "
                   "rank's rows; quant_all_reduce: rows of the tensor")
    p.add_argument("--k", type=int, default=4096,
                   help="inner dimension (matmul_*: k / W per rank); quant_all_reduce: columns, "
                   "a multiple of 128")
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="append one JSON object with the result to this file")
    args = p.parse_args()
    if args.m % args.nprocs:
        p.error(f"--m {args.m} must be a multiple of --nprocs {args.nprocs}")
    if args.op.startswith("matmul_") and args.k % args.nprocs:
        p.error(f"--k {args.k} must be a multiple of --nprocs {args.nprocs}")
    if args.op == "quant_all_reduce" and args.k % 128:
        p.error(f"--k {args.k} must be a multiple of 128 (one scale per 128 elements)")

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
    print(f"# {args.op}: torch = {ranks[0]['torch_way']}, W={args.nprocs}, m={args.m} k={args.k} n={args.n} "
          f"{args.dtype}, {ranks[0]['threads']} threads per rank, torch {ranks[0]['torch']} "
          f"(BLAS_INFO={ranks[0]['blas']}), median of {args.rounds} rounds (min-max)")
    for name, (m, lo, hi) in med.items():
        print(f"{name:>12}: {m * 1e3:9.1f} ms  ({lo * 1e3:.1f}-{hi * 1e3:.1f})")
    ratio = med["commfuse"][0] / med["torch_gloo"][0]
    print(f"commfuse / torch_gloo: {ratio:.3f}   #wrong {wrong}   "
          f"max |diff| {max(r['max_abs_diff'] for r in ranks):.3g}")
    if args.json:
        with open(args.json, "a") as f:
            json.dump({"op": args.op, "W": args.nprocs, "m": args.m, "k": args.k,
                       "n": args.n, "dtype": "int8" if args.op == "quant_all_reduce" else args.dtype,
                       "torch_way": ranks[0]["torch_way"], "torch": ranks[0]["torch"],
                       "blas": ranks[0]["blas"], "threads": ranks[0]["threads"],
                       "rounds": args.rounds,
                       "ms": {k: v[0] * 1e3 for k, v in med.items()},
                       "ms_min": {k: v[1] * 1e3 for k, v in med.items()},
                       "ms_max": {k: v[2] * 1e3 for k, v in med.items()}, "ratio": ratio,
                       "wrong": wrong}, f)
            f.write("\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
