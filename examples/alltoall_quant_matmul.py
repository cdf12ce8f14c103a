"""alltoall_quant_matmul (CANN's aclnnAlltoAllQuantMatmul) on 4 local ranks: A16W8 and
A16W4 with bfloat16 activations.

Each rank holds BS tokens of hidden size H; the all-to-all gives rank r tokens
[r·BS/R, (r+1)·BS/R) of every rank side by side (BS/R, R·H); they are quantized per token
(int8, or the int4 range for A16W4) and multiplied by this rank's integer weights
(R·H, N) with per-channel scales. int4 weights are ml_dtypes.int4 arrays: commfuse packs
them.

    python3 examples/alltoall_quant_matmul.py
"""

import sys

import ml_dtypes
import numpy as np

import commfuse

BS, H, N = 64, 256, 128
BF16 = ml_dtypes.bfloat16


def reference(x1s, w, w_scale, rank, q_max):
    """SPEC §3 in numpy: permute, per-token quantize (RNE), integer matmul, epilogue."""
    R = len(x1s)
    rows = slice(rank * BS // R, (rank + 1) * BS // R)
    perm = np.concatenate([x[rows] for x in x1s], axis=1).astype(np.float32)
    amax = np.abs(perm).max(axis=1)
    q = np.clip(np.rint(perm * (np.float32(q_max) / amax)[:, None]), -q_max, q_max)
    acc = q.astype(np.int64) @ w.astype(np.int64)
    return acc * w_scale.astype(np.float64) * (amax / np.float32(q_max))[:, None], perm


def worker(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        x1s = [np.random.default_rng(s).standard_normal((BS, H)).astype(BF16) for s in range(R)]
        rng = np.random.default_rng(100 + rank)  # this rank's expert weights
        report = {}
        for combo, q_max in [("A16W8", 127), ("A16W4", 7)]:
            w_float = rng.standard_normal((R * H, N)).astype(np.float32)
            w_scale = (np.abs(w_float).max(axis=0) / q_max).astype(np.float32)
            w = np.clip(np.rint(w_float / w_scale), -q_max, q_max)
            x2 = w.astype(np.int8) if combo == "A16W8" else w.astype(ml_dtypes.int4)
            out, permuted = commfuse.alltoall_quant_matmul(
                x1s[rank], x2, w_scale, comm.name, R, return_alltoall_out=True)
            want, perm = reference(x1s, w, w_scale, rank, q_max)
            err = np.abs(out.astype(np.float64) - want)
            ok = (np.array_equal(permuted.astype(np.float32), perm) and
                  bool(np.all(err <= 2.0 ** -8 * np.abs(want) + 1e-6 * np.abs(want).max())))
            # How far the quantized layer is from the unquantized bfloat16 one.
            full = perm.astype(np.float64) @ w_float.astype(np.float64)
            rel = float(np.abs(out.astype(np.float64) - full).max() / np.abs(full).max())
            report[combo] = (ok, float(err.max() / np.abs(want).max()), rel)
        return report


if __name__ == "__main__":
    results = commfuse.spawn(worker, nprocs=4)
    passed = True
    for combo in ("A16W8", "A16W4"):
        ok = all(r[combo][0] for r in results)
        passed &= ok
        err = max(r[combo][1] for r in results)
        rel = max(r[combo][2] for r in results)
        print(f"{combo}: x1 [{BS}, {H}] bfloat16 x 4 ranks, x2 [{4 * H}, {N}] -> output "
              f"[{BS // 4}, {N}] bfloat16; max |err| vs the numpy reference {err:.3g}, vs the "
              f"unquantized float64 product {rel:.3g} (of max |output|): "
              f"{'PASS' if ok else 'FAIL'}")
    print(f"alltoall_quant_matmul: {'verified against numpy (PASS)' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)
