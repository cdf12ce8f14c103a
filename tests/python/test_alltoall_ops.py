"""alltoall_quant_matmul and alltoall_matmul through Python at world sizes 1, 2, 4 against
numpy references that follow SPEC §3: permute, per-token quantize (RNE, the same float32
operations as the spec's formulas), exact integer matmul, epilogue.

alltoall_out is compared bitwise (pure data movement); alltoall_matmul bitwise (small
integer inputs, exact in every dtype). The quantized output is compared with the float64
epilogue of the exact int32 accumulators: |out - ref| <= eps·|ref| + 2^-20·Σ|terms|, eps
the output dtype's relative rounding bound (bfloat16 2^-8, float16 2^-11), so only the
final rounding and float32 noise are allowed, no change of a quantized code."""

import ml_dtypes
import numpy as np
import pytest

import commfuse
from quant_ref import dynamic_quantize, permuted
from ranks import FLOAT_DTYPES, WORLD_SIZES, run, small_ints

F32 = np.float32
INT4 = np.dtype(ml_dtypes.int4)
EPS = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
BS, H, N = 8, 128, 24

# (name, x1 dtype, bias: None | "same" | "float32" | dtype name, smooth scale,
#  transpose_x2, return/out= alltoall_out, out=, int4 passed packed, zero row)
A2A_CASES = [
    ("A16W8", "bfloat16", None, False, False, "return", False, False, False),
    ("A16W8", "float16", "float32", True, True, "out", True, False, True),
    ("A16W4", "bfloat16", "same", True, False, None, False, False, False),
    ("A16W4", "float16", None, False, True, "return", True, True, True),
    ("A4W4", "bfloat16", "float32", False, True, "return", False, False, False),
    ("A4W4", "float16", "float16", False, False, "out", True, True, False),
]


def _close(got, ref64, terms, eps, what):
    err = np.abs(got.astype(np.float64) - ref64)
    bound = eps * np.abs(ref64) + 2.0 ** -20 * terms
    assert np.all(err <= bound), (what, float(err.max()), float((err - bound).max()))


def _a2a_quant_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        K = R * H
        for ci, (combo, xname, bias_kind, smooth_on, transposed, a2a_kind, use_out, packed,
                 zero_row) in enumerate(A2A_CASES):
            what = (combo, ci)
            xdt = FLOAT_DTYPES[xname]
            a4 = combo == "A4W4"
            w4 = combo != "A16W8"
            rngs = [np.random.default_rng(100 * ci + s) for s in range(R)]
            if a4:
                blocks = [g.integers(-8, 8, (BS, H)).astype(np.int8) for g in rngs]
                tscales = [g.uniform(0.01, 0.1, BS).astype(F32) for g in rngs]
            else:
                blocks = [g.standard_normal((BS, H)).astype(xdt) for g in rngs]
                if zero_row:
                    for b in blocks:
                        b[0] = 0  # permuted row 0 of rank 0 is all zeros: s = 0
            wr = np.random.default_rng(7000 + 10 * ci + rank)  # weights differ per rank
            w = wr.integers(-8, 8, (K, N)) if w4 else wr.integers(-127, 128, (K, N))
            x2_scale = wr.uniform(0.001, 0.01, N).astype(F32)
            smooth = (wr.uniform(0.5, 2.0, K).astype(xdt) if smooth_on else None)
            out_dt = xdt  # A16: x1's dtype; A4W4: output_dtype (below)
            bias = bias64 = None
            if bias_kind is not None:
                bdt = F32 if bias_kind == "float32" else (
                    xdt if bias_kind == "same" else FLOAT_DTYPES[bias_kind])
                bias = wr.standard_normal(N).astype(bdt)
                bias64 = bias.astype(np.float64)

            # x1 / x2 as the caller holds them
            wt = np.ascontiguousarray(w.T) if transposed else w
            kw = {}
            if w4:
                x2 = wt.astype(INT4)
                if packed:
                    x2, kw["x2_dtype"] = commfuse.pack_int4(x2), "int4"
            else:
                x2 = wt.astype(np.int8)
            x1 = blocks[rank]
            if a4:
                x1 = x1.astype(INT4)
                if packed:
                    x1, kw["x1_dtype"] = commfuse.pack_int4(x1), "int4"
                kw["x1_scale"] = tscales[rank]
                kw["x1_quant_mode"] = 3
                kw["output_dtype"] = out_dt
            elif smooth is not None:
                kw["x1_scale"] = smooth
            rows = BS // R
            out = np.empty((rows, N), out_dt) if use_out else None
            if a2a_kind == "out":
                kw["alltoall_out"] = (np.empty((rows, K // 2), np.uint8) if a4 and packed
                                      else np.empty((rows, K), INT4 if a4 else xdt))
            output, a2a = commfuse.alltoall_quant_matmul(
                x1, x2, x2_scale, comm.name, R, bias=bias, transpose_x2=transposed,
                return_alltoall_out=a2a_kind == "return", out=out, **kw)

            perm = permuted(blocks, rank)
            assert output.shape == (rows, N) and output.dtype == out_dt, what
            if use_out:
                assert output is out
            if a2a_kind is None:
                assert a2a is None
            else:
                if a2a_kind == "out":
                    assert a2a is kw["alltoall_out"]
                got = commfuse.unpack_int4(a2a) if a4 and packed else a2a
                if a4:
                    assert np.array_equal(np.asarray(got).astype(np.int8), perm), what
                else:
                    assert a2a.dtype == xdt and np.array_equal(a2a.view(np.uint8),
                                                               perm.view(np.uint8)), what
            # The reference epilogue, in float64 over exact integer accumulators.
            if a4:
                seg_scales = np.stack([tscales[s][rank * rows:(rank + 1) * rows]
                                       for s in range(R)], axis=1)  # (rows, R)
                acc = np.stack([perm[:, s * H:(s + 1) * H].astype(np.int64) @
                                w[s * H:(s + 1) * H].astype(np.int64) for s in range(R)])
                terms = acc * seg_scales.T[:, :, None] * x2_scale.astype(np.float64)
                ref = terms.sum(axis=0)
                mag = np.abs(terms).sum(axis=0)
            else:
                q, s = dynamic_quantize(perm, 7 if w4 else 127, smooth)
                if zero_row and rank == 0:
                    assert s[0] == 0
                acc = q @ w.astype(np.int64)
                ref = acc * x2_scale.astype(np.float64) * s.astype(np.float64)[:, None]
                mag = np.abs(ref)
            if bias64 is not None:
                ref = ref + bias64
                mag = mag + np.abs(bias64)
            _close(output, ref, mag, EPS[np.dtype(out_dt).name], what)
        return len(A2A_CASES)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_alltoall_quant_matmul(world_size):
    assert run(_a2a_quant_body, world_size) == [len(A2A_CASES)] * world_size


# (dtype, bias: None | "same" | "float32", transpose_x2, out= buffers)
MM_CASES = [(d, b, t, o) for d in FLOAT_DTYPES for b, t, o in
            [(None, False, False), ("same", True, True), ("float32", False, True)]]


def _a2a_matmul_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        K = R * 16
        for i, (name, bias_kind, transposed, use_out) in enumerate(MM_CASES):
            dt = FLOAT_DTYPES[name]
            blocks = [small_ints(100 * i + s, (BS, 16)) for s in range(R)]
            w = small_ints(1000 * i + rank, (K, 5))
            b = None if bias_kind is None else small_ints(7 * i + rank, (5,)) * 2
            bias = None if b is None else b.astype(F32 if bias_kind == "float32" else dt)
            x2 = np.ascontiguousarray(w.T).astype(dt) if transposed else w.astype(dt)
            rows = BS // R
            out = np.empty((rows, 5), dt) if use_out else None
            a2a_out = np.empty((rows, K), dt) if use_out else None
            output, a2a = commfuse.alltoall_matmul(
                blocks[rank].astype(dt), x2, comm, R, bias=bias, transpose_x2=transposed,
                return_alltoall_out=not use_out and i % 2 == 0, out=out, alltoall_out=a2a_out)
            perm = permuted(blocks, rank)
            want = perm @ w + (0 if b is None else b)
            assert output.dtype == dt and output.shape == (rows, 5)
            np.testing.assert_array_equal(output.astype(np.float64), want, err_msg=str(MM_CASES[i]))
            if use_out:
                assert output is out and a2a is a2a_out
            if a2a is not None:
                np.testing.assert_array_equal(a2a.astype(np.float64), perm)
            else:
                assert not use_out and i % 2 == 1
        return len(MM_CASES)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_alltoall_matmul(world_size):
    assert run(_a2a_matmul_body, world_size) == [len(MM_CASES)] * world_size


def test_alltoall_errors_without_a_group():
    x1 = np.zeros((4, 128), ml_dtypes.bfloat16)
    x2 = np.zeros((128, 8), np.int8)
    s = np.ones(8, F32)
    with pytest.raises(commfuse.InvalidArgument, match="unknown group 'nope'") as e:
        commfuse.alltoall_quant_matmul(x1, x2, s, "nope", 1)
    assert e.value.code == 161002
    with pytest.raises(commfuse.InvalidArgument, match="unknown group 'nope'"):
        commfuse.alltoall_matmul(x1, x2.astype(ml_dtypes.bfloat16), "nope", 1)
    with pytest.raises(commfuse.InvalidArgument, match="x2: int4 shape .* even last dim"):
        commfuse.alltoall_quant_matmul(x1, np.zeros((128, 7), INT4), s, "nope", 1)
    with pytest.raises(commfuse.InvalidArgument, match="x2: an ml_dtypes.int4 array"):
        commfuse.alltoall_quant_matmul(x1, np.zeros((128, 8), INT4), s, "nope", 1,
                                       x2_dtype="int8")


def test_alltoall_inputs_are_not_copied(monkeypatch):
    """Contiguous inputs and out= buffers reach libcommfuse as the caller's memory; an
    ml_dtypes.int4 array is packed (a copy, as documented), packed bytes are not."""
    seen = {}
    monkeypatch.setattr(commfuse._commfuse, "alltoall_quant_matmul",
                        lambda *a: seen.__setitem__("q", a))
    monkeypatch.setattr(commfuse._commfuse, "alltoall_matmul",
                        lambda *a: seen.__setitem__("m", a))
    ptr = lambda a: a.__array_interface__["data"][0]
    x1 = np.zeros((4, 128), np.float16)
    x2 = np.zeros((128, 8), np.int8)
    s, smooth, bias = np.ones(8, F32), np.ones(128, np.float16), np.ones(8, F32)
    out = np.empty((4, 8), np.float16)
    commfuse.alltoall_quant_matmul(x1, x2, s, "g", 1, bias=bias, x1_scale=smooth, out=out)
    x1r, x2r, sr, group, outr, a2ar, br, x1sr, m1, m2, t, stream, packed_x2 = seen["q"]
    assert [r.data_ptr for r in (x1r, x2r, sr, outr, br, x1sr)] == [
        ptr(a) for a in (x1, x2, s, out, bias, smooth)]
    assert (group, a2ar, m1, m2, t, stream, packed_x2) == ("g", None, 7, 2, False, 0, None)
    packed = np.zeros((128, 4), np.uint8)
    commfuse.alltoall_quant_matmul(x1, packed, s, "g", 1, x2_dtype="int4",
                                   return_alltoall_out=True)
    x2r = seen["q"][1]
    assert x2r.data_ptr == ptr(packed) and x2r.dtype == "int4" and x2r.shape == (128, 8)
    assert seen["q"][5].shape == (4, 128)
    unpacked = np.zeros((8, 128), INT4)  # (N, R*H) with transpose_x2
    commfuse.alltoall_quant_matmul(x1, unpacked, s, "g", 1, transpose_x2=True)
    x2r = seen["q"][1]
    assert x2r.dtype == "int4" and x2r.shape == (8, 128) and x2r.data_ptr != ptr(unpacked)
    assert seen["q"][4].shape == (4, 8) and seen["q"][10] is True
    w = np.zeros((128, 8), np.float16)
    commfuse.alltoall_matmul(x1, w, "g", 1, out=out)
    x1r, x2r, group, outr, a2ar, br, t, stream, packed_x2 = seen["m"]
    assert packed_x2 is None
    assert [r.data_ptr for r in (x1r, x2r, outr)] == [ptr(x1), ptr(w), ptr(out)]
    assert stream == 0  # host arrays: no stream


def _a4w4_without_scale_body(rank):
    with commfuse.init() as comm:
        try:
            commfuse.alltoall_quant_matmul(np.zeros((2, 8), INT4), np.zeros((8, 4), INT4),
                                           np.ones(4, F32), comm, 1, x1_quant_mode=3)
        except commfuse.Error as e:
            return type(e).__name__, e.code, e.message
        return None


def test_a4w4_without_x1_scale_is_a_null_pointer_error():
    name, code, message = run(_a4w4_without_scale_body, 1)[0]
    assert (name, code) == ("NullPointerError", 161001)
    assert "alltoall_quant_matmul(rank 0): x1ScaleOptional is null" in message
