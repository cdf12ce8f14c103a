"""quant_all_reduce / quant_reduce_scatter (CANN's aclnnQuantAllReduce /
aclnnQuantReduceScatter) with the quantize helpers, on 4 local ranks.

Each rank quantizes its float32 partial activations (int8 codes with one float32 scale per
128 elements, and MX float8_e4m3fn codes with one E8M0 scale per 32), and the group sums
the dequantized blocks: float32 in rank order, rounded once to bfloat16.

    python3 examples/quant_all_reduce.py
"""

import sys

import ml_dtypes
import numpy as np

import commfuse

BS, H = 32, 1024


def worker(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        xs = [np.random.default_rng(s).standard_normal((BS, H)).astype(np.float32)
              for s in range(R)]  # every rank's partial sums (each rank uses its own)
        exact = np.sum(xs, axis=0, dtype=np.float64)
        report = {}
        for mode, dtype in [("per_token_group", np.int8), ("mx", ml_dtypes.float8_e4m3fn)]:
            q, scales = commfuse.quantize(xs[rank], dtype, mode)
            y = commfuse.quant_all_reduce(q, scales, comm.name, output_dtype=ml_dtypes.bfloat16)
            part = commfuse.quant_reduce_scatter(q, scales, comm, output_dtype="bfloat16")
            # numpy reference: every rank's block dequantized (codes · scale in float32),
            # summed in rank order in float32, rounded once to bfloat16: the same bits.
            acc = None
            for s in range(R):
                qs, ss = commfuse.quantize(xs[s], dtype, mode)
                if mode == "mx":
                    scale = np.exp2(ss.view(np.uint8).astype(np.float32) - 127).reshape(BS, -1)
                    deq = qs.astype(np.float32) * np.repeat(scale, 32, axis=1)
                else:
                    deq = qs.astype(np.float32) * np.repeat(ss, 128, axis=1)
                acc = deq if acc is None else acc + deq
                if s == rank:  # the quantize round trip: dequantize is the same map
                    back = commfuse.dequantize(qs, ss, mode)
                    assert np.array_equal(back, deq)
            want = acc.astype(ml_dtypes.bfloat16)
            rows = slice(rank * BS // R, (rank + 1) * BS // R)
            bitwise = (np.array_equal(y.view(np.uint16), want.view(np.uint16)) and
                       np.array_equal(part.view(np.uint16), want[rows].view(np.uint16)))
            rel = float(np.abs(y.astype(np.float64) - exact).max() / np.abs(exact).max())
            report[mode] = (bitwise, rel, y.tobytes())
        return report


if __name__ == "__main__":
    results = commfuse.spawn(worker, nprocs=4)
    passed = True
    for mode, bound in [("per_token_group", 2e-2), ("mx", 1e-1)]:
        same = all(r[mode][2] == results[0][mode][2] for r in results)
        bitwise = all(r[mode][0] for r in results)
        rel = max(r[mode][1] for r in results)
        ok = same and bitwise and rel < bound
        passed &= ok
        print(f"{mode:>15}: [{BS}, {H}] x 4 ranks -> bfloat16; bitwise equal to the numpy "
              f"reference: {bitwise}; identical on every rank: {same}; max error vs float64 "
              f"sum of the unquantized inputs {rel:.3g} of max |sum|: {'PASS' if ok else 'FAIL'}")
    print(f"quant_all_reduce: {'verified against numpy (PASS)' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)
