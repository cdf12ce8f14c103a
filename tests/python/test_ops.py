"""The three matmul operators through Python at world sizes 1, 2, 4, every dtype path
(float32, float16, bfloat16; bias of x1's dtype or float32; x2 row-major or a transposed
view; new outputs or out= buffers), against numpy."""

import numpy as np
import pytest

import commfuse
from ranks import FLOAT_DTYPES, WORLD_SIZES, run, small_ints

# (dtype, bias: None | "same" | "float32", x2 transposed view, out= buffers)
CASES = [(d, b, t, o) for d in FLOAT_DTYPES for b, t, o in
         [(None, False, False), ("same", True, False), ("float32", False, True),
          ("float32", True, True)]]


def _x2(w, dt, transposed):
    """w (k, n) as dt: row-major, or the transposed view of an (n, k) array."""
    return np.ascontiguousarray(w.T).astype(dt).T if transposed else w.astype(dt)


def _bias(kind, n, dt, seed):
    if kind is None:
        return None, 0.0
    b = small_ints(seed, (n,)) * 2
    return b.astype(np.float32 if kind == "float32" else dt), b


def _all_gather_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        m, k, n = 3, 16, 5
        checked = 0
        for i, (name, bias_kind, transposed, use_out) in enumerate(CASES):
            dt = FLOAT_DTYPES[name]
            blocks = [small_ints(100 * i + s, (m, k)) for s in range(R)]
            w = small_ints(1000 * i + rank, (k, n))  # weights differ per rank
            bias, bias64 = _bias(bias_kind, n, dt, 7 * i + rank)
            out = np.empty((m * R, n), dt) if use_out else None
            gout = np.empty((m * R, k), dt) if use_out else None
            output, gather_out = commfuse.all_gather_base_mm(
                blocks[rank].astype(dt), _x2(w, dt, transposed), comm.name, R, bias=bias,
                out=out, gather_out=gout)
            want_gather = np.concatenate(blocks)
            assert output.dtype == dt and gather_out.dtype == dt, name
            assert output.shape == (m * R, n) and gather_out.shape == (m * R, k)
            np.testing.assert_array_equal(gather_out.astype(np.float64), want_gather)
            np.testing.assert_array_equal(output.astype(np.float64),
                                          want_gather @ w + bias64, err_msg=str(CASES[i]))
            if use_out:
                assert output is out and gather_out is gout
            checked += 1
        # gather_output=False: gather_out is the empty (0,) array; comm_turn accepted.
        x = small_ints(5, (2, 4)).astype(np.float32)
        w = small_ints(6, (4, 3)).astype(np.float32)
        output, gather_out = commfuse.all_gather_base_mm(x, w, comm, R, gather_output=False,
                                                         comm_turn=2)
        assert gather_out.shape == (0,)
        np.testing.assert_array_equal(output, np.concatenate([x] * R) @ w)
        # m = 0: empty outputs, the op still synchronizes.
        output, gather_out = commfuse.all_gather_base_mm(np.zeros((0, 4), np.float32), w,
                                                         comm.name, R)
        assert output.shape == (0, 3) and gather_out.shape == (0, 4)
        # Random floats (not exact): float32 result close to float64.
        rng = np.random.default_rng(42)
        xs = [rng.standard_normal((4, 33)).astype(np.float32) for _ in range(R)]
        w = np.random.default_rng(43 + rank).standard_normal((33, 7)).astype(np.float32)
        output, _ = commfuse.all_gather_base_mm(xs[rank], w, comm.name, R)
        want = np.concatenate(xs).astype(np.float64) @ w.astype(np.float64)
        np.testing.assert_allclose(output, want, rtol=1e-5, atol=1e-5)
        return checked


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_all_gather_base_mm(world_size):
    assert run(_all_gather_body, world_size) == [len(CASES)] * world_size


def _reduce_scatter_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        rows, k, n = 2, 24, 6
        m = rows * R
        for i, (name, bias_kind, transposed, use_out) in enumerate(CASES):
            dt = FLOAT_DTYPES[name]
            x1s = [small_ints(100 * i + s, (m, k)) for s in range(R)]
            ws = [small_ints(1000 * i + s, (k, n)) for s in range(R)]
            bias, bias64 = _bias(bias_kind, n, dt, i)  # the same bias on every rank
            out = np.empty((rows, n), dt) if use_out else None
            output = commfuse.mm_reduce_scatter_base(x1s[rank].astype(dt),
                                                     _x2(ws[rank], dt, transposed), comm.name,
                                                     R, bias=bias, out=out)
            total = sum(a @ b for a, b in zip(x1s, ws)) + bias64  # bias once, not R times
            assert output.dtype == dt and output.shape == (rows, n)
            np.testing.assert_array_equal(output.astype(np.float64),
                                          total[rank * rows:(rank + 1) * rows],
                                          err_msg=str(CASES[i]))
            if use_out:
                assert output is out
        return output.tobytes()


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_mm_reduce_scatter_base(world_size):
    run(_reduce_scatter_body, world_size)


def _all_reduce_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        results = []
        for i, (name, bias_kind, transposed, use_out) in enumerate(CASES):
            dt = FLOAT_DTYPES[name]
            shape = (2, 3, 16) if i % 2 else (5, 16)  # (b, s, k) and (m, k)
            x1s = [small_ints(100 * i + s, shape) for s in range(R)]
            ws = [small_ints(1000 * i + s, (16, 4)) for s in range(R)]
            bias, bias64 = _bias(bias_kind, 4, dt, i)
            out = np.empty(shape[:-1] + (4,), dt) if use_out else None
            output = commfuse.mm_all_reduce_base(x1s[rank].astype(dt),
                                                 _x2(ws[rank], dt, transposed), comm.name,
                                                 bias=bias, out=out)
            want = sum(a @ b for a, b in zip(x1s, ws)) + bias64
            assert output.dtype == dt and output.shape == shape[:-1] + (4,)
            np.testing.assert_array_equal(output.astype(np.float64), want,
                                          err_msg=str(CASES[i]))
            if use_out:
                assert output is out
            results.append(output.tobytes())
        # Random floats: rank-order fp32 sum, so every rank gets the same bits.
        x = np.random.default_rng(rank).standard_normal((7, 40)).astype(np.float32)
        w = np.random.default_rng(100 + rank).standard_normal((40, 9)).astype(np.float32)
        output = commfuse.mm_all_reduce_base(x, w, comm.name)
        xs = [np.random.default_rng(s).standard_normal((7, 40)) for s in range(R)]
        ws = [np.random.default_rng(100 + s).standard_normal((40, 9)) for s in range(R)]
        want = sum(a.astype(np.float32).astype(np.float64) @ b.astype(np.float32) for a, b in
                   zip(xs, ws))
        np.testing.assert_allclose(output, want, rtol=1e-4, atol=1e-4)
        results.append(output.tobytes())
        return results


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_mm_all_reduce_base(world_size):
    results = run(_all_reduce_body, world_size)
    assert all(r == results[0] for r in results), "ranks got different bits"


def _fast_and_general_paths_body(rank):
    # numpy arrays of a native dtype take the wrappers' per-call fast path; anything else
    # (a Fortran-ordered x1, a strided bias: both copied first) takes the general one. Both must give the same bits and the same errors.
    with commfuse.init() as comm:
        R = comm.world_size
        rng = np.random.default_rng(10 + rank)
        x1 = rng.standard_normal((2 * R, 8)).astype(np.float32)
        w = rng.standard_normal((8, 5)).astype(np.float32)
        # The same on every rank: the reducing ops add it once and require that.
        bias = np.random.default_rng(99).standard_normal(5).astype(np.float32)
        general_x1 = np.asfortranarray(x1)
        assert not general_x1.flags.c_contiguous
        # The fast path really takes these arrays and rejects the general ones.
        from commfuse._tensor import fast_matmul_inputs, fast_output
        assert fast_matmul_inputs(x1, w, bias) is not None
        assert fast_matmul_inputs(general_x1, w, bias) is None
        assert fast_output(np.empty((2, 5), np.float32), (2, 5), x1) is not None
        assert fast_output(np.empty((2, 5), np.float16), (2, 5), x1) is None
        for op, args in [(commfuse.all_gather_base_mm, (comm.name, R)),
                         (commfuse.mm_reduce_scatter_base, (comm.name, R)),
                         (commfuse.mm_all_reduce_base, (comm.name,))]:
            fast = op(x1, w, *args, bias=bias)
            general = op(general_x1, w, *args, bias=np.repeat(bias, 2)[::2])
            fast, general = (fast[0], general[0]) if isinstance(fast, tuple) else (fast, general)
            assert fast.tobytes() == general.tobytes(), op.__name__
            into = np.empty_like(fast)  # an out= the fast path takes, written in place
            got = op(x1, w, *args, bias=bias, out=into)
            assert (got[0] if isinstance(got, tuple) else got) is into
            assert into.tobytes() == fast.tobytes(), op.__name__
        # A wrong out= shape leaves the fast path and is rejected by name.
        with pytest.raises(commfuse.InvalidArgument, match=r"output shape is \(1, 1\)"):
            commfuse.mm_reduce_scatter_base(x1, w, comm.name, R, out=np.empty((1, 1), np.float32))
        return True


def test_fast_and_general_paths_agree():
    assert run(_fast_and_general_paths_body, 2) == [True, True]


def _scalar_arrays_body(rank):
    # A 0-d array given where a tensor goes is one element, shape (1,): a scalar bias applies
    # where n = 1 and is rejected by name elsewhere (it was once taken as no bias at all,
    # silently), a scalar x1 is not 2-D, and the peers fail at once naming the rank.
    with commfuse.init() as comm:
        R = comm.world_size
        x1 = np.ones((2, 4), np.float32)
        got, _ = commfuse.all_gather_base_mm(x1, np.ones((4, 1), np.float32), comm.name, R,
                                             bias=np.float32(5))
        assert np.all(got == 9)
        got = commfuse.mm_all_reduce_base(x1, np.ones((4, 1), np.float32), comm.name,
                                          bias=np.array(5, np.float32))
        assert np.all(got == 4 * R + 5)
        with pytest.raises(commfuse.InvalidArgument,
                           match=rf"all_gather_matmul\(rank {rank}\): bias shape is \(1,\)"):
            commfuse.all_gather_base_mm(x1, np.ones((4, 3), np.float32), comm.name, R,
                                        bias=np.float32(5))
        with pytest.raises(commfuse.InvalidArgument,
                           match=r"x1 must be 2-D .* but has shape \(1,\)"):
            commfuse.mm_all_reduce_base(np.float32(1), np.ones((1, 3), np.float32), comm.name)
        return True


def test_scalar_arrays_are_one_element():
    assert run(_scalar_arrays_body, 2) == [True, True]


def _x2_layouts(w):
    """w (k, n) in the layouts a user may pass, each holding w's values: (name, array, read
    in place by the SPEC §2 ops). Negative and zero strides and a column step are copied
    first; a row block of a wider array and a transposed view are read as they are (the
    alltoall ops copy a row block too)."""
    k, n = w.shape
    wide = np.zeros((k, n + 3), w.dtype)
    wide[:, :n] = w
    stepped = np.zeros((k, 2 * n), w.dtype)
    stepped[:, ::2] = w
    flipped = np.ascontiguousarray(w[::-1])
    row = np.broadcast_to(w[:1], (k, n))
    return [("dense", w, True), ("transposed view", np.ascontiguousarray(w.T).T, True),
            ("row block", wide[:, :n], True), ("column step", stepped[:, ::2], False),
            ("negative strides", flipped[::-1], False), ("broadcast rows", row, False)]


def _x2_layouts_body(rank):
    from commfuse._tensor import dense_or_transposed, weight_in_place
    with commfuse.init() as comm:
        R = comm.world_size
        x = small_ints(rank, (2, 16)).astype(np.float32)
        w = small_ints(10 + rank, (16, 5)).astype(np.float32)
        w_a2a = small_ints(20 + rank, (16 * R, 5)).astype(np.float32)
        w_i8 = small_ints(30 + rank, (16 * R, 5)).astype(np.int8)
        scale = np.full(5, 0.5, np.float32)
        ops = {
            "all_gather_base_mm": lambda x2: commfuse.all_gather_base_mm(x, x2, comm, R)[0],
            "mm_reduce_scatter_base": lambda x2: commfuse.mm_reduce_scatter_base(
                np.concatenate([x] * R), x2, comm, R),
            "mm_all_reduce_base": lambda x2: commfuse.mm_all_reduce_base(x, x2, comm),
            "alltoall_matmul": lambda x2: commfuse.alltoall_matmul(
                np.concatenate([x] * R), x2, comm, R)[0],
            "alltoall_quant_matmul": lambda x2: commfuse.alltoall_quant_matmul(
                np.concatenate([x] * R).astype(np.float16), x2, scale, comm, R)[0],
        }
        weights = {"alltoall_matmul": w_a2a, "alltoall_quant_matmul": w_i8}
        checked = 0
        for op, call in ops.items():
            layouts = _x2_layouts(weights.get(op, w))
            want = call(layouts[0][1])
            for name, x2, in_place in layouts:
                if op.startswith("alltoall"):  # these read only a dense x2 or its transpose
                    in_place = name in ("dense", "transposed view")
                    assert dense_or_transposed(x2) == in_place, (name, x2.strides)
                else:
                    assert weight_in_place(x2) == in_place, (name, x2.strides)
                got = call(x2)
                np.testing.assert_array_equal(got, call(np.ascontiguousarray(x2)),
                                              err_msg=f"{op}, x2 {name}")
                if name != "broadcast rows":  # the others hold w's values
                    np.testing.assert_array_equal(got, want, err_msg=f"{op}, x2 {name}")
                checked += 1
        return checked


def test_every_op_takes_x2_in_any_layout():
    """Every matmul operator takes x2 in any 2-D layout: what libcommfuse cannot read in place
    is copied first (the SPEC §2 ops had refused negative and zero strides that the alltoall
    ops copied), with the dense call's bits."""
    assert run(_x2_layouts_body, 2) == [30, 30]
