"""SPEC §6 through Python: torch_npu's x1_scale / x2_scale / output_dtype keywords of
all_gather_base_mm, mm_reduce_scatter_base and mm_all_reduce_base, for A8W8 (int8), FP8
(ml_dtypes float8 formats, mixed) and HiF8 (raw uint8 codes with x1_dtype / x2_dtype), at
world sizes 1, 2, 4, against float64 numpy. Small integer codes and power-of-two scales
make every sum exact, so outputs equal the float64 result rounded once to the output dtype,
bit for bit."""

import ml_dtypes
import numpy as np
import pytest

import commfuse
from ranks import FLOAT_DTYPES, WORLD_SIZES, run, small_ints

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)


def _codes(values, fmt):
    """values (small integers, float64) as fmt: 'int8', an ml_dtypes float8, or 'hifloat8'
    (raw uint8 codes, with the dtype name to pass)."""
    if fmt == "int8":
        return values.astype(np.int8), None
    if fmt == "hifloat8":
        return commfuse.convert(values.astype(np.float32), "hifloat8"), "hifloat8"
    return values.astype(fmt), None


def _rounded(exact, dt):
    """The exact float64 result rounded once (RNE) to the output dtype, back as float64."""
    return exact.astype(np.float32).astype(dt).astype(np.float64)


def _pow2(seed, shape):
    return np.ldexp(1.0, np.random.default_rng(seed).integers(-2, 3, shape)).astype(np.float32)


MODES = [("int8", "int8"), (E4M3, E5M2), (E5M2, E5M2), ("hifloat8", "hifloat8")]


def _agm_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        m, k, n = 3, 16, 5
        for i, (f1, f2) in enumerate(MODES):
            a8w8 = f1 == "int8"
            vals = [small_ints(10 * i + s, (m, k)) * 3 for s in range(R)]
            s1 = [_pow2(20 * i + s, (m,) if a8w8 else (1,)) for s in range(R)]
            w = small_ints(30 * i + rank, (k, n)) * 2
            s2 = _pow2(40 * i + rank, (n,))
            bias = small_ints(50 * i, (n,)).astype(np.float32)
            x1, d1 = _codes(vals[rank], f1)
            x2, d2 = _codes(w, f2)
            out_dt = ["bfloat16", "float32", "float16", None][i]
            output, gather_out = commfuse.all_gather_base_mm(
                x1, x2, comm.name, R, bias=bias, x1_scale=s1[rank], x2_scale=s2,
                output_dtype=out_dt, x1_dtype=d1, x2_dtype=d2)
            want_dt = FLOAT_DTYPES[out_dt or "bfloat16"]
            assert output.dtype == want_dt and output.shape == (m * R, n)
            assert gather_out.dtype == x1.dtype and gather_out.shape == (m * R, k)
            np.testing.assert_array_equal(gather_out, np.concatenate(
                [_codes(v, f1)[0] for v in vals]))
            scale = np.concatenate([np.broadcast_to(s, (m,)) for s in s1]).astype(np.float64)
            want = (np.concatenate(vals) @ w) * (scale[:, None] * s2[None, :]) + bias
            np.testing.assert_array_equal(output.astype(np.float64), _rounded(want, want_dt),
                                          err_msg=str(MODES[i]))
        # A8W8 with an int32 bias (added to the int32 sum) and a transposed x2 view.
        x = small_ints(7, (2, 8)).astype(np.int8)
        w = small_ints(8 + rank, (8, 4))
        wt = np.ascontiguousarray(w.T).astype(np.int8).T
        ibias = np.array([1000, -7, 0, 3], np.int32)
        s2 = np.full(1, 0.5, np.float32)
        output, _ = commfuse.all_gather_base_mm(x, wt, comm, R, bias=ibias, x2_scale=s2,
                                                output_dtype=np.float32, gather_output=False)
        want = (np.concatenate([x.astype(np.float64)] * R) @ w + ibias) * 0.5
        np.testing.assert_array_equal(output, want)


def _reduce_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        m, k, n = 2 * R, 16, 5
        for i, (f1, f2) in enumerate(MODES):
            a8w8 = f1 == "int8"
            vals = [small_ints(60 * i + s, (m, k)) * 3 for s in range(R)]
            ws = [small_ints(70 * i + s, (k, n)) * 2 for s in range(R)]
            s1 = [_pow2(80 * i + s, (m,) if a8w8 else (1,)) for s in range(R)]
            s2 = [_pow2(90 * i + s, (n,)) for s in range(R)]
            bias = small_ints(95 * i, (n,)).astype(ml_dtypes.bfloat16)
            x1, d1 = _codes(vals[rank], f1)
            x2, d2 = _codes(ws[rank], f2)
            total = sum((vals[s] @ ws[s]) * (np.broadcast_to(s1[s], (m,)).astype(np.float64)[:, None]
                                              * s2[s][None, :]) for s in range(R)) + \
                bias.astype(np.float64)
            out_dt = ["float32", "bfloat16", None, "float16"][i]
            kw = dict(bias=bias, x1_scale=s1[rank], x2_scale=s2[rank], output_dtype=out_dt,
                      x1_dtype=d1, x2_dtype=d2)
            rs = commfuse.mm_reduce_scatter_base(x1, x2, comm.name, R, **kw)
            ar = commfuse.mm_all_reduce_base(x1, x2, comm.name, **kw)
            want_dt = FLOAT_DTYPES[out_dt or "bfloat16"]
            assert rs.dtype == want_dt and ar.dtype == want_dt
            rows = m // R
            want = _rounded(total, want_dt)
            np.testing.assert_array_equal(rs.astype(np.float64),
                                          want[rank * rows:(rank + 1) * rows], str(MODES[i]))
            np.testing.assert_array_equal(ar.astype(np.float64), want, str(MODES[i]))


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_all_gather_base_mm_quantized(world_size):
    run(_agm_body, world_size)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_reducing_ops_quantized(world_size):
    run(_reduce_body, world_size)


def _reject_body(rank):
    with commfuse.init() as comm:
        x = np.ones((2, 8), np.int8)
        w = np.ones((8, 4), np.int8)
        with pytest.raises(commfuse.InvalidArgument, match=r"x2_scale is required"):
            commfuse.all_gather_base_mm(x, w, comm, 1)
        with pytest.raises(commfuse.InvalidArgument, match=r"x2_scale dtype int64 .*not supported"):
            commfuse.all_gather_base_mm(x, w, comm, 1, x2_scale=np.ones(4, np.int64))
        with pytest.raises(commfuse.InvalidArgument,
                           match=r"x2_scale is given but x1 is float32"):
            commfuse.mm_all_reduce_base(x.astype(np.float32), w.astype(np.float32), comm,
                                        x2_scale=np.ones(4, np.float32))
        with pytest.raises(commfuse.InvalidArgument, match=r"output_dtype"):
            commfuse.mm_reduce_scatter_base(x, w, comm, 1, x2_scale=np.ones(4, np.float32),
                                            output_dtype="no_such_dtype")
        # The communicator is still usable after the rejections.
        out = commfuse.mm_all_reduce_base(x, w, comm, x2_scale=np.ones(4, np.float32))
        np.testing.assert_array_equal(out.astype(np.float64), np.full((2, 4), 8.0))


def test_quantized_rejections():
    run(_reject_body, 1)
