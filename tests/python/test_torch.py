"""torch CPU tensors through commfuse: zero-copy TensorRefs (contiguous, transposed and
offset views, raw codes), the collectives and the operators with torch inputs returning
torch tensors (float32, float16, bfloat16, int8; values against float64 numpy), ``out=``
torch buffers written in place, and tensors known only by DLPack.

Marked ``torch``. ``make test-python`` runs them with an interpreter that has torch and
sets COMMFUSE_REQUIRE_TORCH=1, which turns a missing torch into a failure, not a skip."""

import os

import numpy as np
import pytest

import commfuse
from commfuse._tensor import Args, tensor_ref
from ranks import WORLD_SIZES, run, small_ints

pytestmark = pytest.mark.torch

FLOATS = ["float32", "float16", "bfloat16"]
FORMATS = FLOATS + ["int8", "int32", "int64"]


@pytest.fixture
def torch():
    """The torch module; a skip without it, or a failure under COMMFUSE_REQUIRE_TORCH=1."""
    try:
        import torch
    except ImportError as e:
        if os.environ.get("COMMFUSE_REQUIRE_TORCH") == "1":
            pytest.fail(f"COMMFUSE_REQUIRE_TORCH=1 but torch cannot be imported: {e}",
                        pytrace=False)
        pytest.skip(f"torch cannot be imported: {e}")
    return torch


def _t(torch, a, name):
    """float64 numpy array a as a torch tensor of dtype name (exact for small_ints)."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(getattr(torch, name))


def _np(t):
    """A torch result as float64 numpy (bfloat16 has no numpy dtype in torch)."""
    return t.double().numpy()


# --- TensorRefs: the memory libcommfuse reads is the tensor's own -------------------------

@pytest.mark.parametrize("name", FORMATS)
def test_contiguous_tensor_is_not_copied(torch, name):
    a = torch.zeros((6, 10), dtype=getattr(torch, name))
    ref = tensor_ref(a, contiguous=True)
    assert ref.data_ptr == a.data_ptr() and ref.dtype == name
    assert ref.shape == (6, 10) and ref.strides == (10, 1) and not ref.read_only
    with Args("test", "no-such-group") as args:  # the operators' argument path
        assert args.input(a, "x1", contiguous=True).data_ptr == a.data_ptr()


def test_tensor_views(torch):
    w = torch.zeros((5, 8), dtype=torch.bfloat16)
    t = tensor_ref(w.t())  # x2 as the transposed view of an (n, k) weight
    assert t.data_ptr == w.data_ptr() and t.shape == (8, 5) and t.strides == (1, 8)
    base = torch.zeros((10, 4), dtype=torch.float16)
    rows = base[2:6]  # a row block: contiguous, at an offset
    r = tensor_ref(rows, contiguous=True)
    assert r.data_ptr == rows.data_ptr() == base.data_ptr() + 2 * 4 * 2 and r.shape == (4, 4)
    g = torch.ones((2, 3), requires_grad=True)  # autograd leaves are read through detach()
    assert tensor_ref(g).data_ptr == g.data_ptr()


def test_non_contiguous_tensor_that_must_be_dense_is_copied(torch):
    a = torch.arange(24, dtype=torch.float32).reshape(4, 6)[:, ::2]
    dense = tensor_ref(a, contiguous=True)
    assert dense.data_ptr != a.data_ptr() and dense.strides == (3, 1)
    strided = tensor_ref(a)  # where strides are allowed, they pass
    assert strided.data_ptr == a.data_ptr() and strided.strides == (6, 2)


def test_raw_codes_and_unsupported_dtypes(torch):
    codes = torch.zeros((3, 4), dtype=torch.uint8)
    h = tensor_ref(codes, "hifloat8")
    assert h.dtype == "hifloat8" and h.data_ptr == codes.data_ptr()
    p = tensor_ref(codes, "int4")  # packed, two elements per byte along the last dim
    assert p.dtype == "int4" and p.shape == (3, 8) and p.strides == (8, 1)
    plain = tensor_ref(codes)  # no dtype=: plain bytes, for the data-movement collectives
    assert plain.dtype == "uint8" and plain.data_ptr == codes.data_ptr()
    with pytest.raises(commfuse.InvalidArgument, match="float64 is not a commfuse dtype"):
        tensor_ref(torch.zeros(3, dtype=torch.float64))
    with pytest.raises(commfuse.InvalidArgument, match="cannot hold bfloat16"):
        tensor_ref(torch.zeros(3, dtype=torch.float16), "bfloat16")


class DLPackOnly:
    """A tensor known only by the DLPack protocol (not recognised as torch by commfuse)."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kw):
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


@pytest.mark.parametrize("name", FORMATS)
def test_dlpack_tensor_is_not_copied(torch, name):
    a = torch.zeros((3, 4), dtype=getattr(torch, name))
    ref = tensor_ref(DLPackOnly(a))
    assert ref.data_ptr == a.data_ptr() and ref.dtype == name and ref.shape == (3, 4)
    assert tensor_ref(DLPackOnly(a.t())).strides == (1, 4)


# --- Operators: torch in, torch out, values against float64 -------------------------------

def _ops_body(rank, name):
    import torch

    dt = getattr(torch, name)
    with commfuse.init() as comm:
        R = comm.world_size
        m, k, n = 3, 16, 5
        blocks = [small_ints(10 + s, (m, k)) for s in range(R)]
        w = small_ints(20 + rank, (n, k))  # this rank's (n, k) weight; x2 = w.t()
        b = small_ints(30, (n,)) * 2
        x1, x2, bias = _t(torch, blocks[rank], name), _t(torch, w, name).t(), _t(torch, b, name)
        want_gather = np.concatenate(blocks)
        want = want_gather @ w.T + b

        # all_gather_base_mm: new torch results.
        output, gather_out = commfuse.all_gather_base_mm(x1, x2, comm.name, R, bias=bias)
        assert isinstance(output, torch.Tensor) and isinstance(gather_out, torch.Tensor)
        assert output.dtype == dt and gather_out.dtype == dt
        assert output.shape == (m * R, n) and gather_out.shape == (m * R, k)
        np.testing.assert_array_equal(_np(gather_out), want_gather)
        np.testing.assert_array_equal(_np(output), want)

        # out= / gather_out= as views into larger torch buffers: written in place, exactly
        # there (the rows around them keep their -7).
        obuf = torch.full((m * R + 2, n), -7.0, dtype=dt)
        gbuf = torch.full((m * R + 2, k), -7.0, dtype=dt)
        out, gout = obuf[1:-1], gbuf[1:-1]
        o, g = commfuse.all_gather_base_mm(x1, x2, comm, R, bias=bias, out=out, gather_out=gout)
        assert o is out and g is gout
        assert o.data_ptr() == obuf.data_ptr() + n * obuf.element_size()
        np.testing.assert_array_equal(_np(obuf[1:-1]), want)
        np.testing.assert_array_equal(_np(gbuf[1:-1]), want_gather)
        assert torch.all(obuf[0] == -7) and torch.all(obuf[-1] == -7)
        assert torch.all(gbuf[0] == -7) and torch.all(gbuf[-1] == -7)

        # mm_reduce_scatter_base: the sum of every rank's x1_s @ x2_s, row block `rank`.
        x1s = [small_ints(40 + s, (2 * R, k)) for s in range(R)]
        ws = [small_ints(50 + s, (n, k)) for s in range(R)]
        total = sum(a @ c.T for a, c in zip(x1s, ws)) + b  # bias once, not R times
        out = torch.empty((2, n), dtype=dt)
        y = commfuse.mm_reduce_scatter_base(_t(torch, x1s[rank], name),
                                            _t(torch, ws[rank], name).t(), comm.name, R,
                                            bias=bias, out=out)
        assert y is out
        np.testing.assert_array_equal(_np(out), total[2 * rank:2 * rank + 2])

        # mm_all_reduce_base with a (b, s, k) x1: a new torch result.
        x1s = [small_ints(60 + s, (2, 3, k)) for s in range(R)]
        y = commfuse.mm_all_reduce_base(_t(torch, x1s[rank], name),
                                        _t(torch, ws[rank], name).t(), comm.name, bias=bias)
        assert isinstance(y, torch.Tensor) and y.dtype == dt and y.shape == (2, 3, n)
        np.testing.assert_array_equal(_np(y), sum(a @ c.T for a, c in zip(x1s, ws)) + b)
        out = torch.empty((2, 3, n), dtype=dt)
        assert commfuse.mm_all_reduce_base(_t(torch, x1s[rank], name),
                                           _t(torch, ws[rank], name).t(), comm.name,
                                           bias=bias, out=out) is out
        assert torch.equal(out, y)

        # Tensors known only by DLPack work too (results are numpy: nothing says torch).
        output, _ = commfuse.all_gather_base_mm(DLPackOnly(x1), DLPackOnly(x2), comm.name, R,
                                                bias=DLPackOnly(bias))
        assert isinstance(output, np.ndarray)
        np.testing.assert_array_equal(output.astype(np.float64), want)

        # A non-contiguous torch out= is refused, never silently replaced by a copy.
        bad = torch.empty((m * R, 2 * n), dtype=dt)[:, ::2]
        try:
            commfuse.all_gather_base_mm(x1, x2, comm.name, R, out=bad)
        except commfuse.Error as e:
            return type(e).__name__, e.message
        return None


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("name", FLOATS)
def test_operators_with_torch_tensors(torch, name, world_size):
    got = run(_ops_body, world_size, name)
    # Every rank refuses its own bad out= (or fails because a peer did first).
    assert all(g is not None for g in got), got
    assert any(g[0] == "InvalidArgument" and "output must be row-major contiguous" in g[1]
               for g in got), got


# --- Collectives and quant_all_reduce with torch tensors ----------------------------------

def _collectives_body(rank, name):
    import torch

    dt = getattr(torch, name)
    with commfuse.init() as comm:
        R = comm.world_size
        xs = [small_ints(70 + s, (2 * R, 3)) for s in range(R)]
        x = _t(torch, xs[rank], name)

        g = comm.all_gather(x)
        assert isinstance(g, torch.Tensor) and g.dtype == dt and g.shape == (2 * R * R, 3)
        np.testing.assert_array_equal(_np(g), np.concatenate(xs))

        s = comm.all_reduce(x)
        assert isinstance(s, torch.Tensor) and s.dtype == dt
        np.testing.assert_array_equal(_np(s), sum(xs))
        y = x.clone()
        assert comm.all_reduce(y, out=y) is y  # in place
        np.testing.assert_array_equal(_np(y), sum(xs))

        out = torch.empty((2, 3), dtype=dt)
        assert comm.reduce_scatter(x, out=out) is out
        np.testing.assert_array_equal(_np(out), sum(xs)[2 * rank:2 * rank + 2])

        a = comm.all_to_all(x)
        assert isinstance(a, torch.Tensor) and a.dtype == dt
        np.testing.assert_array_equal(
            _np(a), np.concatenate([xs[src][2 * rank:2 * rank + 2] for src in range(R)]))

        b = x.clone() if rank == R - 1 else torch.zeros_like(x)
        ptr = b.data_ptr()
        assert comm.broadcast(b, root=R - 1) is b and b.data_ptr() == ptr
        np.testing.assert_array_equal(_np(b), xs[R - 1])

        if name == "int8":  # exact and saturating, not wrapping
            big = torch.full((4,), 100, dtype=torch.int8)
            assert comm.all_reduce(big).tolist() == [min(100 * R, 127)] * 4
        return True


@pytest.mark.parametrize("name", FLOATS + ["int8", "int32"])
def test_collectives_with_torch_tensors(torch, name):
    assert run(_collectives_body, 2, name) == [True, True]


def _quant_body(rank):
    import torch

    with commfuse.init() as comm:
        R = comm.world_size
        bs, h = 4, 128
        xs = [small_ints(80 + s, (bs, h)) * (s + 1) for s in range(R)]
        scales = torch.full((bs, 1), 0.5, dtype=torch.float32)  # one per 128 elements
        out = torch.full((bs, h), -7.0, dtype=torch.bfloat16)
        got = commfuse.quant_all_reduce(_t(torch, xs[rank], "int8"), scales, comm.name,
                                        out=out)
        assert got is out
        np.testing.assert_array_equal(_np(out), 0.5 * sum(xs))
        return True


@pytest.mark.parametrize("world_size", [1, 2])
def test_quant_all_reduce_with_torch_tensors(torch, world_size):
    assert run(_quant_body, world_size) == [True] * world_size


def _quant_matmul_body(rank):
    import torch

    with commfuse.init() as comm:
        R = comm.world_size
        m, k, n = 2, 16, 3
        xs = [small_ints(90 + s, (m, k)) * 5 for s in range(R)]
        w = small_ints(95 + rank, (n, k)) * 3
        s1 = torch.full((m, 1), 0.25, dtype=torch.float32)  # per token, (m, 1)
        s2 = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float32)
        # A8W8 torch int8 tensors (x2 a transposed view): bfloat16 torch results (the default).
        output, gather_out = commfuse.all_gather_base_mm(
            _t(torch, xs[rank], "int8"), _t(torch, w, "int8").t(), comm.name, R, x1_scale=s1,
            x2_scale=s2)
        assert isinstance(output, torch.Tensor) and output.dtype == torch.bfloat16
        assert gather_out.dtype == torch.int8 and gather_out.shape == (m * R, k)
        want = (np.concatenate(xs) @ w.T) * 0.25 * np.array([1.0, 2.0, 0.5])
        np.testing.assert_array_equal(_np(output), want)
        y = commfuse.mm_all_reduce_base(_t(torch, xs[rank], "int8"), _t(torch, w, "int8").t(),
                                        comm.name, x1_scale=s1, x2_scale=s2,
                                        output_dtype=torch.float32)
        assert y.dtype == torch.float32
        return True


@pytest.mark.parametrize("world_size", [1, 2])
def test_quantized_matmul_with_torch_tensors(torch, world_size):
    assert run(_quant_matmul_body, world_size) == [True] * world_size


def _hifloat8_body(rank):
    """HiFloat8 codes in torch uint8 tensors: the op's results are torch tensors too,
    gather_out the codes themselves (uint8: torch has no HiFloat8 dtype)."""
    import torch

    with commfuse.init() as comm:
        R = comm.world_size
        vals = [small_ints(60 + s, (2, 8)) for s in range(R)]
        w = small_ints(70 + rank, (8, 3))
        x1 = torch.from_numpy(commfuse.convert(vals[rank].astype(np.float32), "hifloat8"))
        x2 = torch.from_numpy(commfuse.convert(w.astype(np.float32), "hifloat8"))
        s2 = torch.ones(3, dtype=torch.float32)
        output, gather_out = commfuse.all_gather_base_mm(x1, x2, comm.name, R, x2_scale=s2,
                                                         x1_dtype="hifloat8",
                                                         x2_dtype="hifloat8")
        assert isinstance(output, torch.Tensor) and output.dtype == torch.bfloat16
        assert isinstance(gather_out, torch.Tensor) and gather_out.dtype == torch.uint8
        want_codes = np.concatenate(
            [commfuse.convert(v.astype(np.float32), "hifloat8") for v in vals])
        assert np.array_equal(gather_out.numpy(), want_codes)
        assert np.array_equal(_np(output), np.concatenate(vals) @ w)  # small, exact in bf16
        return True


@pytest.mark.parametrize("world_size", [1, 2])
def test_hifloat8_codes_in_torch_tensors(torch, world_size):
    assert run(_hifloat8_body, world_size) == [True] * world_size


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def _torch_data_movement_body(rank, torch_dtype_name):
    import torch

    dt = getattr(torch, torch_dtype_name)

    def values(s):  # (4, 3) small values every dtype holds; bool: 0/1
        return np.arange(12).reshape(4, 3) * (s + 3) % 2 ** 7

    def as_numpy_bytes(t):  # compare the raw bytes (bool included)
        return t.contiguous().view(torch.uint8).numpy()

    def want_bytes(a):
        return _bits(a.astype(np.dtype(torch_dtype_name)))

    with commfuse.init() as comm:
        R = comm.world_size
        x = torch.arange(12).reshape(4, 3).mul(rank + 3).remainder(2 ** 7).to(dt)
        got = comm.all_gather(x)
        assert isinstance(got, torch.Tensor) and got.dtype == dt and got.shape == (4 * R, 3)
        assert np.array_equal(as_numpy_bytes(got),
                              want_bytes(np.concatenate([values(s) for s in range(R)])))
        buf = torch.arange(12).reshape(4, 3).mul(rank + 3).remainder(2 ** 7).to(dt)
        comm.broadcast(buf, root=0)
        assert np.array_equal(as_numpy_bytes(buf), want_bytes(values(0)))
        with pytest.raises(commfuse.InvalidArgument, match=f"dtype {torch_dtype_name} cannot"):
            comm.all_reduce(x)
        return True


# uint16 is numpy-only here: torch has torch.uint16 only from 2.3 (Debian 12's is 1.13).
@pytest.mark.parametrize("dtype", ["uint8", "int16", "bool"])
def test_torch_data_movement_dtypes(torch, dtype):
    assert run(_torch_data_movement_body, 2, dtype) == [True, True]
