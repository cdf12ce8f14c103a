"""Arrays reach libcommfuse without copies where the layout allows, and out= buffers are
written in place. The pointer libcommfuse will read (TensorRef.data_ptr) is compared with
the array's own; the operators and collectives take their arrays through the same
commfuse._tensor.Args path checked here."""

import ml_dtypes
import numpy as np
import pytest

import commfuse
from commfuse import _commfuse
from commfuse._tensor import Args, tensor_ref
from ranks import DLPackOnly, run


def ptr(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16,
                                ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                ml_dtypes.float8_e8m0fnu, np.int8, np.int32, np.int64])
def test_contiguous_input_is_not_copied(dt):
    a = np.zeros((6, 10), dt)
    ref = tensor_ref(a, contiguous=True)
    assert ref.data_ptr == ptr(a) and ref.shape == (6, 10) and ref.strides == (10, 1)
    assert ref.dtype == commfuse._dtypes.format_of(np.dtype(dt))
    # Through the operators' argument path too.
    with Args("test", "no-such-group") as args:
        assert args.input(a, "x1", contiguous=True).data_ptr == ptr(a)


def test_views_are_not_copied():
    w = np.zeros((5, 8), ml_dtypes.bfloat16)
    t = tensor_ref(w.T)  # x2 as the transposed view of an (n, k) array
    assert t.data_ptr == ptr(w) and t.shape == (8, 5) and t.strides == (1, 8)
    rows = np.zeros((10, 4), np.float16)[2:6]  # a row block: contiguous, offset
    assert tensor_ref(rows, contiguous=True).data_ptr == ptr(rows) == ptr(rows.base) + 2 * 4 * 2
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False  # read-only inputs are fine, and not copied
    r = tensor_ref(ro)
    assert r.data_ptr == ptr(ro) and r.read_only


def test_non_contiguous_input_that_must_be_dense_is_copied():
    a = np.zeros((4, 6), np.float32)[:, ::2]
    assert tensor_ref(a, contiguous=True).data_ptr != ptr(a)
    assert tensor_ref(a).data_ptr == ptr(a)  # where strides are allowed, they pass


def test_raw_codes_and_packed_int4():
    codes = np.zeros((3, 4), np.uint8)
    h = tensor_ref(codes, "hifloat8")
    assert h.dtype == "hifloat8" and h.data_ptr == ptr(codes)
    p = tensor_ref(codes, "int4")  # two elements per byte along the last dim
    assert p.dtype == "int4" and p.shape == (3, 8) and p.strides == (8, 1)
    assert tensor_ref(codes).dtype == "uint8"  # without dtype=: plain uint8 data
    with pytest.raises(commfuse.InvalidArgument, match="raw codes need dtype="):
        tensor_ref(codes.astype(np.uint32))
    with pytest.raises(commfuse.InvalidArgument, match="pack_int4"):
        tensor_ref(np.zeros(4, ml_dtypes.int4))
    with pytest.raises(commfuse.InvalidArgument, match="cannot hold bfloat16"):
        tensor_ref(np.zeros(4, np.float16), "bfloat16")


class DLPackOnly:
    """A tensor known only by the DLPack protocol (what torch, jax, cupy offer)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_tensor_is_not_copied():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tensor_ref(DLPackOnly(a))
    assert t.data_ptr == ptr(a) and t.dtype == "float32" and t.shape == (3, 4)
    assert _commfuse.TensorRef(DLPackOnly(a.T)).strides == (1, 4)


def _out_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        x1 = np.full((2, 4), rank + 1, np.float16)
        w = np.ones((4, 3), np.float16)
        out = np.full((2 * R, 3), -7, np.float16)
        gout = np.full((2 * R, 4), -7, np.float16)
        o, g = commfuse.all_gather_base_mm(x1, w, comm.name, R, out=out, gather_out=gout)
        assert o is out and g is gout
        assert out.tolist() == [[4.0] * 3, [4.0] * 3, [8.0] * 3, [8.0] * 3]
        assert gout[2:].tolist() == [[2.0] * 4] * 2
        # A non-contiguous out= is refused, never silently replaced by a copy.
        bad = np.empty((2 * R, 6), np.float16)[:, ::2]
        try:
            commfuse.all_gather_base_mm(x1, w, comm.name, R, out=bad)
        except commfuse.Error as e:
            return type(e).__name__, e.message
        return None


def test_operators_write_into_out_buffers():
    got = run(_out_body, 2)
    assert got[0][0] in ("InvalidArgument", "RuntimeFailure")
    assert "output must be row-major contiguous" in got[0][1] or "output" in got[1][1]


def _read_only_dlpack_out_body(rank):
    with commfuse.init() as comm:
        frozen = bytes(16)  # immutable: written in place through DLPack before
        try:
            out = DLPackOnly(np.frombuffer(frozen, np.float32))
            comm.all_reduce(np.ones(4, np.float32), out=out)
            outcome = "accepted"
        except commfuse.InvalidArgument as e:
            outcome = str(e)
        writable = np.zeros(4, np.float32)
        comm.all_reduce(np.ones(4, np.float32), out=DLPackOnly(writable))
        # An x known only by DLPack has no ndim: its result shape is the library's (4,), not
        # the 0-d that np.ndim(x) gives such an object (then out=(4,) was refused).
        out = np.zeros(4, np.float32)
        assert comm.all_reduce(DLPackOnly(np.full(4, 2, np.float32)), out=out) is out
        assert comm.all_reduce(DLPackOnly(np.full(4, 3, np.float32))).shape == (4,)
        return outcome, frozen == bytes(16), writable.tolist() + out.tolist()


def test_a_read_only_dlpack_output_is_refused():
    outcome, intact, written = run(_read_only_dlpack_out_body, 1)[0]
    assert "read-only" in outcome and intact, outcome
    assert written == [1.0] * 4 + [2.0] * 4  # a writable one is written in place
    ro = tensor_ref(DLPackOnly(np.frombuffer(bytes(8), np.float32)), output=True)
    assert ro.read_only
