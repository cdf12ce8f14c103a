"""Quantized tensor parallelism with commfuse (SPEC §6): torch_npu's
npu_all_gather_base_mm with x1_scale / x2_scale, A8W8.

Each of 4 ranks quantizes its activations per token to int8 (amax / 127, in numpy), holds an
int8 weight quantized per output channel, and calls all_gather_base_mm: only the int8 codes
and one float32 scale per row cross between ranks, the product is exact in int32, and the
output (bfloat16) is f32(gather_out @ x2) * (x1_scale[i] * x2_scale[j]) rounded once. Each
rank checks it against a float64 numpy evaluation of that formula and reports how close the
quantized result is to the unquantized float32 product.

    python3 examples/quantized_all_gather_base_mm.py
"""

import sys

import ml_dtypes
import numpy as np

import commfuse


def quantize_per_row(x, axis):
    """int8 codes and float32 scales, amax / 127 per row (axis=1) or per column (axis=0)."""
    amax = np.abs(x).max(axis=axis, keepdims=True)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(x / scale), -127, 127).astype(np.int8)
    return codes, scale.reshape(-1)


def worker(rank, world_size, m, k, n):
    with commfuse.init() as comm:
        rng = [np.random.default_rng(s) for s in range(world_size)]
        acts = [r.standard_normal((m, k)).astype(np.float32) for r in rng]  # every rank's
        weight = np.random.default_rng(100 + rank).standard_normal((k, n)).astype(np.float32)
        q_acts = [quantize_per_row(a, 1) for a in acts]
        x2, x2_scale = quantize_per_row(weight, 0)  # per output channel
        x1, x1_scale = q_acts[rank]

        output, gather_out = commfuse.all_gather_base_mm(x1, x2, comm.name, world_size,
                                                         x1_scale=x1_scale, x2_scale=x2_scale)

        codes = np.concatenate([q for q, _ in q_acts])
        scales = np.concatenate([s for _, s in q_acts]).astype(np.float64)
        acc = codes.astype(np.int64) @ x2.astype(np.int64)  # exact
        want = (acc * (scales[:, None] * x2_scale.astype(np.float64)[None, :]))
        want_bf16 = want.astype(np.float32).astype(ml_dtypes.bfloat16)
        got = output.astype(np.float64)
        # f32(acc) and the scales' product in fp32 each round once: within 2^-22 relative of
        # the float64 value before the bfloat16 rounding, so at most one bf16 ulp apart.
        ulp = np.abs(want_bf16.astype(np.float64)) * 2.0**-7 + 1e-30
        ok = (output.dtype == ml_dtypes.bfloat16 and np.array_equal(gather_out, codes)
              and bool(np.all(np.abs(got - want_bf16.astype(np.float64)) <= ulp)))
        exact = np.concatenate(acts).astype(np.float64) @ weight.astype(np.float64)
        rel = float(np.abs(got - exact).max() / np.abs(exact).max())
        return ok, rel


if __name__ == "__main__":
    world_size, m, k, n = 4, 16, 256, 64
    results = commfuse.spawn(worker, args=(world_size, m, k, n), nprocs=world_size)
    for rank, (ok, rel) in enumerate(results):
        print(f"rank {rank}: A8W8 output vs the SPEC §6 formula: {'PASS' if ok else 'FAIL'}; "
              f"vs the unquantized float32 product: max error {rel:.3%} of max |value|")
    passed = all(ok for ok, _ in results)
    print(f"quantized all_gather_base_mm: world size {world_size}, x1 [{m * world_size}, {k}] int8"
          f" per token, x2 [{k}, {n}] int8 per channel -> bfloat16: "
          f"{'verified against numpy (PASS)' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)
