"""mm_reduce_scatter_base (torch_npu's npu_mm_reduce_scatter_base) on 4 local ranks.

Each rank multiplies its own x1 (m, k) by its own x2 (k, n); the products are summed over
ranks and rank r keeps rows [r*m/R, (r+1)*m/R). Checked against numpy.

    python3 examples/mm_reduce_scatter_base.py
"""

import sys

import ml_dtypes
import numpy as np

import commfuse

M, K, N = 64, 256, 32


def inputs(rank):
    rng = np.random.default_rng(rank)
    return rng.standard_normal((M, K)), rng.standard_normal((K, N))


def worker(rank):
    with commfuse.init() as comm:  # env:// set up by commfuse.spawn
        R = comm.world_size
        x1, x2 = inputs(rank)
        bias = np.linspace(-1, 1, N)
        dt = ml_dtypes.bfloat16
        output = commfuse.mm_reduce_scatter_base(x1.astype(dt), x2.astype(dt), comm.name, R,
                                                 bias=bias.astype(np.float32))
        # Reference from the same bf16-rounded inputs, in float64.
        parts = [inputs(s) for s in range(R)]
        total = sum(a.astype(dt).astype(np.float64) @ b.astype(dt).astype(np.float64)
                    for a, b in parts) + bias.astype(np.float32)
        want = total[rank * M // R:(rank + 1) * M // R]
        err = np.abs(output.astype(np.float64) - want)
        # One bf16 rounding (2^-8 relative) plus fp32 accumulation error.
        bound = np.abs(want) * 2.0**-8 + 1e-4 * np.abs(want).max()
        return bool(np.all(err <= bound)), float(err.max()), output.shape


if __name__ == "__main__":
    results = commfuse.spawn(worker, nprocs=4)
    for rank, (ok, err, shape) in enumerate(results):
        print(f"rank {rank}: output {list(shape)} bfloat16, max |err| {err:.4g}: "
              f"{'PASS' if ok else 'FAIL'}")
    passed = all(r[0] for r in results)
    print(f"mm_reduce_scatter_base: {'verified against numpy (PASS)' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)
