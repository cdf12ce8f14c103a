"""mm_all_reduce_base (torch_npu's npu_mm_all_reduce_base) on 4 local ranks.

Row-parallel linear layer: each rank holds a slice of the hidden dim (x1 (b, s, k/R) and
x2 (k/R, n)); the output is the full product, identical bits on every rank.

    python3 examples/mm_all_reduce_base.py
"""

import sys

import numpy as np

import commfuse

B, S, K, N = 2, 8, 128, 16


def worker(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        rng = np.random.default_rng(0)
        x = rng.standard_normal((B, S, K)).astype(np.float32)
        w = rng.standard_normal((K, N)).astype(np.float32)
        cols = slice(rank * K // R, (rank + 1) * K // R)
        # x2 as a transposed view of an (n, k/R) array: used in place, not copied.
        w_t = np.ascontiguousarray(w[cols].T)
        out = np.empty((B, S, N), np.float32)
        y = commfuse.mm_all_reduce_base(np.ascontiguousarray(x[..., cols]), w_t.T, comm,
                                        out=out)
        assert y is out
        want = x.astype(np.float64) @ w.astype(np.float64)
        ok = np.allclose(y, want, rtol=1e-4, atol=1e-4)
        return ok, float(np.abs(y - want).max()), y.tobytes()


if __name__ == "__main__":
    results = commfuse.spawn(worker, nprocs=4)
    same = all(r[2] == results[0][2] for r in results)
    for rank, (ok, err, _) in enumerate(results):
        print(f"rank {rank}: output [{B}, {S}, {N}] float32, max |err| {err:.3g}: "
              f"{'PASS' if ok else 'FAIL'}")
    print(f"bitwise identical on every rank: {same}")
    passed = same and all(r[0] for r in results)
    print(f"mm_all_reduce_base: {'verified against numpy (PASS)' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)
