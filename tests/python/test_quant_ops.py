"""quant_all_reduce, quant_reduce_scatter, quantize and dequantize through Python against
the numpy references of quant_ref.py (SPEC §4, §5).

Where SPEC pins the bits (dequant = one fp32 multiply, fp32 sum in rank order, one RNE
rounding; quantize of int8 / fp8 codes and their scales) the comparison is bitwise. The
HiFloat8 quantize codes (whose encoder is not re-implemented here) are checked through
their decoded values, within half a step of HiFloat8's grid (_round_trip_bound); every
format's round trip is checked against that bound too."""

import ml_dtypes
import numpy as np
import pytest

import commfuse
from quant_ref import (CODE_DTYPES, QMAX, dequant, quantize_kg, quantize_mx, random_codes,
                       rank_sum, round_to)
from ranks import FLOAT_DTYPES, WORLD_SIZES, run

F32 = np.float32
BF16 = np.dtype(ml_dtypes.bfloat16)
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)

# (code format, scale mode, output dtype, 3-D x, out= buffer)
QUANT_CASES = [
    ("int8", "kg", "float32", False, False),
    ("int8", "kg", "bfloat16", True, True),
    ("float8_e4m3fn", "kg", "bfloat16", False, False),
    ("float8_e5m2", "kg", "float32", False, True),
    ("hifloat8", "kg", "float32", False, False),
    ("hifloat8", "kg", "bfloat16", True, False),
    ("float8_e4m3fn", "mx", "float32", True, False),
    ("float8_e5m2", "mx", "bfloat16", False, True),
    ("float8_e4m3fn", "mx", "float16", False, False),
]
BS, H = 8, 256


def _inputs(case_index, rank, name, mode, three_d):
    rng = np.random.default_rng(1000 * case_index + rank)
    codes = random_codes(rng, name, (BS, H))
    if mode == "mx":
        scales = rng.integers(120, 135, (BS, H // 64, 2)).astype(np.uint8).view(E8M0)
    else:
        scales = (rng.uniform(0.5, 2.0, (BS, H // 128)) *
                  2.0 ** rng.integers(-3, 4, (BS, H // 128))).astype(F32)
    if three_d:
        codes = codes.reshape((2, BS // 2, H))
        scales = scales.reshape((2, BS // 2) + scales.shape[1:])
    return codes, scales


def _quant_reduce_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        for i, (name, mode, out_name, three_d, use_out) in enumerate(QUANT_CASES):
            blocks = [_inputs(i, s, name, mode, three_d) for s in range(R)]
            want32 = rank_sum([dequant(c, s, name, mode) for c, s in blocks])
            dt = FLOAT_DTYPES[out_name]
            want = round_to(want32, dt)
            x, scales = blocks[rank]
            kw = {"dtype": "hifloat8"} if name == "hifloat8" else {}
            out = np.empty(x.shape, dt) if use_out else None
            # output_dtype by name or by dtype, alternately
            od = out_name if i % 2 else dt
            got = commfuse.quant_all_reduce(x, scales, comm.name, output_dtype=od, out=out, **kw)
            assert got.dtype == dt and got.shape == x.shape, QUANT_CASES[i]
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), QUANT_CASES[i]
            if use_out:
                assert got is out
            rows = BS // R
            flat = want.reshape(BS, H)
            out = np.empty((rows, H), dt) if use_out else None
            got = commfuse.quant_reduce_scatter(x, scales, comm, output_dtype=od, out=out, **kw)
            assert got.shape == (rows, H) and got.dtype == dt, QUANT_CASES[i]
            assert np.array_equal(got.view(np.uint8),
                                  flat[rank * rows:(rank + 1) * rows].view(np.uint8)), \
                QUANT_CASES[i]
        # Integer reference values that every output dtype holds exactly: float16 too.
        x = np.ones((BS, 128), np.int8)
        got = commfuse.quant_all_reduce(x, np.full((BS, 1), 0.5, F32), comm.name,
                                        output_dtype=np.float16)
        np.testing.assert_array_equal(got, np.full((BS, 128), 0.5 * R, np.float16))
        return len(QUANT_CASES)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_quant_all_reduce_and_reduce_scatter(world_size):
    assert run(_quant_reduce_body, world_size) == [len(QUANT_CASES)] * world_size


def _round_trip_bound(name, x, s):
    """Largest |x - dequantize(quantize(x))| a format allows: half a step of its grid at
    |x| / s (int8: steps of 1; e4m3: 3 mantissa bits, subnormal step 2^-9; e5m2: 2 bits,
    step 2^-16; HiFloat8 with qmax 15: 3 bits down to |x|/s = 2^-3, fewer below)."""
    ax = np.abs(x)
    if name == "int8":
        return 0.5 * s
    if name == "float8_e4m3fn":
        return 2.0 ** -4 * ax + 2.0 ** -10 * s
    if name == "float8_e5m2":
        return 2.0 ** -3 * ax + 2.0 ** -17 * s
    return np.where(ax >= s / 8, 2.0 ** -4 * ax, 2.0 ** -6 * s)


def _quantize_body(rank):
    checked = []
    rng = np.random.default_rng(7)
    for xname in ("float32", "bfloat16", "float16"):
        x = (rng.standard_normal((4, 256)) * 3).astype(FLOAT_DTYPES[xname])
        x[1, 128:] = 0  # an all-zero K-G group (scale 1) and all-zero MX groups (byte 0)
        x32 = x.astype(F32)
        for name in ("int8", "float8_e4m3fn", "float8_e5m2", "hifloat8"):
            dtype = name if name == "hifloat8" or xname != "float32" else CODE_DTYPES[name]
            q, s = commfuse.quantize(x, dtype, "per_token_group")
            want_q, want_s = quantize_kg(x32, name)
            assert s.dtype == F32 and s.shape == (4, 2)
            assert q.shape == x.shape and q.dtype == CODE_DTYPES[name]
            assert np.array_equal(s, want_s), (xname, name)
            assert s[1, 1] == 1 and not q[1, 128:].view(np.uint8).any()
            if want_q is not None:
                assert np.array_equal(q.view(np.uint8), want_q.view(np.uint8)), (xname, name)
            kw = {"dtype": "hifloat8"} if name == "hifloat8" else {}
            for out_name in ("float32", "bfloat16"):
                back = commfuse.dequantize(q, s, "per_token_group", FLOAT_DTYPES[out_name], **kw)
                want = round_to(dequant(q, s, name, "kg"), FLOAT_DTYPES[out_name])
                assert np.array_equal(back.view(np.uint8), want.view(np.uint8)), (name, out_name)
            back = commfuse.dequantize(q, s, "per_token_group", group_size=128, **kw)
            s_rep = np.repeat(s, 128, axis=1)
            assert np.all(np.abs(x32 - back) <= _round_trip_bound(name, x32, s_rep)), name
            checked.append((xname, name, "kg"))
        for name in ("float8_e4m3fn", "float8_e5m2"):
            q, s = commfuse.quantize(x, name, "mx", group_size=32)
            want_q, want_s = quantize_mx(x32, name)
            assert s.dtype == E8M0 and s.shape == (4, 4, 2) and q.dtype == CODE_DTYPES[name]
            assert np.array_equal(s.view(np.uint8), want_s.view(np.uint8)), (xname, name)
            assert np.array_equal(q.view(np.uint8), want_q.view(np.uint8)), (xname, name)
            out = np.empty(x.shape, BF16)
            back = commfuse.dequantize(q, s, "mx", out=out)
            assert back is out
            want = round_to(dequant(q, s, name, "mx"), BF16)
            assert np.array_equal(back.view(np.uint8), want.view(np.uint8)), (xname, name)
            checked.append((xname, name, "mx"))
    # 3-D input: the scales keep the leading dims.
    x3 = rng.standard_normal((2, 3, 128)).astype(F32)
    q, s = commfuse.quantize(x3, np.int8, "per_token_group")
    assert q.shape == (2, 3, 128) and s.shape == (2, 3, 1)
    q, s = commfuse.quantize(x3, ml_dtypes.float8_e5m2, "mx")
    assert s.shape == (2, 3, 2, 2)
    return len(checked)


def test_quantize_dequantize_round_trip():
    assert run(_quantize_body, 1) == [3 * 6]


def test_quantize_per_token():
    # SPEC §3 / §5: s = amax / Q in fp32, q = clip(rint(v * (Q / amax)), -Q, Q) with Q / amax
    # computed once per row in fp32; a zero row gives zeros and s = 0.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 64)).astype(F32)
    x[1] = 0
    for dt, Q in ((np.int8, 127), ("int4", 7)):
        q, s = commfuse.quantize(x, dt, "per_token")
        assert s.shape == (4,) and s.dtype == F32
        amax = np.abs(x).max(axis=1).astype(F32)
        with np.errstate(divide="ignore"):
            inv = np.where(amax > 0, F32(Q) / amax, F32(0)).astype(F32)
        want = np.clip(np.rint(x * inv[:, None]), -Q, Q).astype(np.int8)
        codes = q if dt is np.int8 else commfuse.unpack_int4(q.reshape(-1), 4 * 64).reshape(4, 64)
        assert np.array_equal(codes, want), dt
        assert np.array_equal(s, (amax / F32(Q)).astype(F32)), dt
        back = commfuse.dequantize(q, s, "per_token", dtype=None if dt is np.int8 else "int4")
        assert np.array_equal(back, (want.astype(F32) * s[:, None]).astype(F32)), dt


def test_quantize_errors():
    x = np.ones((2, 128), F32)
    # per_token wants int8 or int4 codes.
    with pytest.raises(commfuse.InvalidArgument, match="mode per_token takes int8 or int4") as e:
        commfuse.quantize(x, ml_dtypes.float8_e4m3fn, "per_token")
    assert e.value.code == 161002
    with pytest.raises(commfuse.InvalidArgument, match="mode is 'blocks'"):
        commfuse.quantize(x, np.int8, "blocks")
    with pytest.raises(commfuse.InvalidArgument, match="group_size is 64"):
        commfuse.quantize(x, np.int8, "per_token_group", group_size=64)
    with pytest.raises(commfuse.InvalidArgument, match="^quantize: dtype"):
        commfuse.quantize(x, np.complex64, "per_token_group")
    with pytest.raises(commfuse.InvalidArgument, match="multiple of 128"):
        commfuse.quantize(np.ones((2, 100), F32), np.int8, "per_token_group")
    # int4 codes pack in pairs along H: an odd H is named as such, not as a q shape mismatch.
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"^quantize: x dim 1 \(H\) is 5 but int4 codes are packed in pairs"):
        commfuse.quantize(np.ones((2, 5), F32), "int4", "per_token")
    # A plain uint8 array is uint8 data (HiFloat8 codes need dtype="hifloat8"): no code type.
    with pytest.raises(commfuse.InvalidArgument,
                       match="^dequantize: q dtype is uint8 but mode per_token_group takes int8, "
                             "hifloat8"):
        commfuse.dequantize(np.zeros((2, 128), np.uint8), np.ones((2, 1), F32),
                            "per_token_group")
    with pytest.raises(commfuse.InvalidArgument, match="^dequantize: q: .*raw codes need dtype="):
        commfuse.dequantize(np.zeros((2, 128), np.uint32), np.ones((2, 1), F32),
                            "per_token_group")
    with pytest.raises(commfuse.InvalidArgument, match="^quantize: q dtype is bool"):
        commfuse.quantize(x, np.bool_, "per_token_group")
    with pytest.raises(commfuse.InvalidArgument, match="dequantize") as e:
        commfuse.dequantize(np.zeros((2, 128), np.int8), np.ones((2, 3), F32), "per_token_group")
    assert e.value.code == 161002


def test_quant_ops_errors_without_a_group():
    x, s = np.zeros((2, 128), np.int8), np.ones((2, 1), F32)
    with pytest.raises(commfuse.InvalidArgument, match="unknown group 'nope'") as e:
        commfuse.quant_all_reduce(x, s, "nope")
    assert e.value.code == 161002
    with pytest.raises(commfuse.InvalidArgument, match="unknown group 'nope'"):
        commfuse.quant_reduce_scatter(x, s, "nope")
    with pytest.raises(commfuse.InvalidArgument, match="x: array dtype uint32 .* raw codes need"):
        commfuse.quant_all_reduce(x.astype(np.uint32), s, "nope")
    with pytest.raises(commfuse.InvalidArgument, match="output_dtype"):
        commfuse.quant_all_reduce(x, s, "nope", output_dtype="float64")


def test_quant_inputs_are_not_copied(monkeypatch):
    """Contiguous x, scales and out= reach libcommfuse as the caller's memory."""
    seen = {}

    def capture(*args):
        seen["args"] = args

    ptr = lambda a: a.__array_interface__["data"][0]
    monkeypatch.setattr(commfuse._commfuse, "quant_all_reduce", capture)
    monkeypatch.setattr(commfuse._commfuse, "quant_reduce_scatter", capture)
    monkeypatch.setattr(commfuse._commfuse, "dequantize", capture)
    x = np.zeros((4, 256), np.uint8)
    s = np.zeros((4, 4, 2), E8M0)
    out = np.empty((4, 256), BF16)
    for fn in (commfuse.quant_all_reduce, commfuse.quant_reduce_scatter):
        fn(x, s, "g", dtype="hifloat8", out=out if fn is commfuse.quant_all_reduce else None)
        xr, sr, group, outr, op, stream = seen["args"]
        assert (xr.data_ptr, sr.data_ptr, group, op, stream) == (ptr(x), ptr(s), "g", "sum", 0)
        assert xr.dtype == "hifloat8" and sr.dtype == "float8_e8m0"
    assert seen["args"][3].shape == (4, 256)  # unknown group: R taken as 1 for allocation
    commfuse.quant_all_reduce(x, s, "g", dtype="hifloat8", out=out)
    assert seen["args"][3].data_ptr == ptr(out)
    q = np.zeros((4, 256), ml_dtypes.float8_e4m3fn)
    commfuse.dequantize(q, s, "mx", out=out)
    qr, sr, mode, outr, g = seen["args"]
    assert (qr.data_ptr, sr.data_ptr, outr.data_ptr, mode, g) == (ptr(q), ptr(s), ptr(out), "mx", 0)
