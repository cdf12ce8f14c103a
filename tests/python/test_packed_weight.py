"""commfuse.PackedWeight: x2 packed once and passed as packed_x2 to the three matmul
operators gives the results of the calls without it (exact integer inputs, every dtype, x2
row-major and transposed, fast and general paths); an int8 x2 prepared once gives A8W8's
and alltoall_quant_matmul A16W8's bits without it, an int4 one A16W4's; another array's packed form, a wrong
type and bad weights are InvalidArgument, and the group stays usable."""

import ml_dtypes
import numpy as np
import pytest

import commfuse
from ranks import FLOAT_DTYPES, run, small_ints


def _x2(w, dt, transposed):
    return np.ascontiguousarray(w.T).astype(dt).T if transposed else w.astype(dt)


def _ops_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        m, k, n = 3, 70, 100  # k: not a multiple of the packed blocks; n: a column tail
        for i, name in enumerate(FLOAT_DTYPES):
            dt = FLOAT_DTYPES[name]
            for transposed in (False, True):
                w = small_ints(10 * i + rank, (k, n))
                x2 = _x2(w, dt, transposed)
                pw = commfuse.PackedWeight(x2, m * R)
                assert isinstance(pw.packed, bool) and (pw.packed_bytes > 0) == pw.packed
                assert "x2 " + name in pw.description and repr(pw).startswith("PackedWeight(")
                blocks = [small_ints(100 * i + s, (m, k)) for s in range(R)]
                out, gather = commfuse.all_gather_base_mm(blocks[rank].astype(dt), x2, comm.name,
                                                          R, packed_x2=pw)
                np.testing.assert_array_equal(out.astype(np.float64), np.concatenate(blocks) @ w)
                # The general path (taken where a dtype is named).
                out, _ = commfuse.all_gather_base_mm(blocks[rank].astype(dt), x2, comm, R,
                                                     packed_x2=pw, gather_output=False,
                                                     comm_turn=2, x1_dtype=name, x2_dtype=name)
                np.testing.assert_array_equal(out.astype(np.float64), np.concatenate(blocks) @ w)
                x1s = [small_ints(200 * i + s, (m * R, k)) for s in range(R)]
                ws = [small_ints(10 * i + s, (k, n)) for s in range(R)]
                total = sum(a @ b for a, b in zip(x1s, ws))
                pr = commfuse.PackedWeight(x2, m * R)
                rs = commfuse.mm_reduce_scatter_base(x1s[rank].astype(dt), x2, comm.name, R,
                                                     packed_x2=pr)
                np.testing.assert_array_equal(rs.astype(np.float64),
                                              total[rank * m:(rank + 1) * m])
                ar = commfuse.mm_all_reduce_base(x1s[rank].astype(dt), x2, comm.name,
                                                 packed_x2=pr)
                np.testing.assert_array_equal(ar.astype(np.float64), total)
        return True


@pytest.mark.parametrize("world_size", [1, 2])
def test_ops_with_packed_x2_match_numpy(world_size):
    assert run(_ops_body, world_size) == [True] * world_size


def _reject_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        x1 = np.ones((2, 8), np.float32)
        x2 = np.ones((8, 4), np.float32)
        other = np.ones((8, 4), np.float32)
        pw = commfuse.PackedWeight(other)
        with pytest.raises(commfuse.InvalidArgument, match="packed_x2 was packed from another x2"):
            commfuse.all_gather_base_mm(x1, x2, comm.name, R, packed_x2=pw)
        with pytest.raises(commfuse.InvalidArgument,
                           match="packed_x2 must be a commfuse.PackedWeight, got str"):
            commfuse.mm_all_reduce_base(x1, x2, comm.name, packed_x2="x2")
        with pytest.raises(commfuse.InvalidArgument, match="packed_x2 was packed from another x2"):
            commfuse.mm_reduce_scatter_base(np.ones((2 * R, 8), np.float32), x2, comm.name, R,
                                            packed_x2=commfuse.PackedWeight(x2.T.copy().T[:, :3]))
        # The group is still usable, and the right packed form works.
        out, _ = commfuse.all_gather_base_mm(x1, x2, comm.name, R,
                                             packed_x2=commfuse.PackedWeight(x2))
        np.testing.assert_array_equal(out, np.full((2 * R, 4), 8.0, np.float32))
        return True


@pytest.mark.parametrize("world_size", [1, 2])
def test_packed_x2_of_another_array_is_rejected(world_size):
    assert run(_reject_body, world_size) == [True] * world_size


def test_bad_weights_are_rejected():
    with pytest.raises(commfuse.NullPointerError, match="PackedWeight: x2 is None"):
        commfuse.PackedWeight(None)
    with pytest.raises(commfuse.InvalidArgument, match="PackedWeight: x2: array dtype float64"):
        commfuse.PackedWeight(np.ones((4, 4)))
    with pytest.raises(commfuse.InvalidArgument, match="PackedWeight: x2 must be 2-D"):
        commfuse.PackedWeight(np.ones((2, 3, 4), np.float32))
    with pytest.raises(commfuse.InvalidArgument, match="fp8 and HiFloat8 x2 are not supported"):
        commfuse.PackedWeight(np.ones((4, 4), ml_dtypes.float8_e4m3fn))
    with pytest.raises(commfuse.InvalidArgument, match="rows is -1"):
        commfuse.PackedWeight(np.ones((4, 4), np.float32), -1)
    # An ml_dtypes.int4 array: the ops pack it anew on every call, so no PackedWeight could
    # match it; its packed bytes with x2_dtype="int4" are what both take.
    with pytest.raises(commfuse.InvalidArgument, match='x2_dtype="int4"'):
        commfuse.PackedWeight(np.ones((4, 4), ml_dtypes.int4))
    with pytest.raises(commfuse.InvalidArgument, match="x2 must be 2-D.*transpose_x2"):
        commfuse.PackedWeight(np.ones((2, 4, 4), np.int8), transpose_x2=True)


def _one_rank_wrong_body(rank):
    with commfuse.init() as comm:
        x1 = np.ones((2, 8), np.float32)
        x2 = np.ones((8, 4), np.float32)
        packed = "not a PackedWeight" if rank == 0 else commfuse.PackedWeight(x2)
        try:
            commfuse.all_gather_base_mm(x1, x2, comm.name, comm.world_size, packed_x2=packed)
        except commfuse.InvalidArgument as e:
            assert rank == 0 and "packed_x2 must be a commfuse.PackedWeight" in str(e), str(e)
        except commfuse.RuntimeFailure as e:
            assert rank != 0 and "rank 0" in str(e), str(e)
        else:
            raise AssertionError(f"rank {rank}: no error")
        # The group is still usable.
        out, _ = commfuse.all_gather_base_mm(x1, x2, comm.name, comm.world_size)
        np.testing.assert_array_equal(out, np.full((2 * comm.world_size, 4), 8.0, np.float32))
        return True


def test_one_rank_with_a_wrong_packed_x2_fails_its_peers_naming_it():
    assert run(_one_rank_wrong_body, 2) == [True, True]


def _int8_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        m, k, n = 40, 64, 96
        g = np.random.default_rng(50 + rank)
        for transposed in (False, True):
            w = g.integers(-128, 128, (k, n)).astype(np.int8)
            x2 = np.ascontiguousarray(w.T).T if transposed else w
            x1 = g.integers(-128, 128, (m, k)).astype(np.int8)
            s1 = g.uniform(0.01, 0.1, m).astype(np.float32)
            s2 = g.uniform(0.01, 0.1, n).astype(np.float32)
            pw = commfuse.PackedWeight(x2, m * R)
            assert "x2 int8" in pw.description and (pw.packed_bytes > 0) == pw.packed
            kw = dict(x1_scale=s1, x2_scale=s2)
            want, _ = commfuse.all_gather_base_mm(x1, x2, comm.name, R, **kw)
            got, _ = commfuse.all_gather_base_mm(x1, x2, comm.name, R, packed_x2=pw, **kw)
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
            want = commfuse.mm_all_reduce_base(x1, x2, comm.name, **kw)
            got = commfuse.mm_all_reduce_base(x1, x2, comm.name, packed_x2=pw, **kw)
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
            # alltoall_quant_matmul A16W8: x2 (R*H, N), or (N, R*H) with transpose_x2 and
            # the PackedWeight of its .T.
            H, BS = 32, 8 * R
            wa = g.integers(-127, 128, (R * H, n)).astype(np.int8)
            xa = np.ascontiguousarray(wa.T) if transposed else wa
            pa = commfuse.PackedWeight(xa.T if transposed else xa, BS // R)
            act = g.standard_normal((BS, H)).astype(ml_dtypes.bfloat16)
            want_q, _ = commfuse.alltoall_quant_matmul(act, xa, s2, comm, R,
                                                      transpose_x2=transposed)
            got, _ = commfuse.alltoall_quant_matmul(act, xa, s2, comm, R, transpose_x2=transposed,
                                                    packed_x2=pa)
            np.testing.assert_array_equal(got.view(np.uint16), want_q.view(np.uint16))
            with pytest.raises(commfuse.InvalidArgument, match="packed from another x2"):
                commfuse.alltoall_quant_matmul(act, xa, s2, comm, R, transpose_x2=transposed,
                                               packed_x2=commfuse.PackedWeight(xa.copy()))
            # A16W4: int4 x2 as packed bytes (x2_dtype="int4"), (R*H, N), or the (N, R*H)
            # buffer with transpose_x2 for both the PackedWeight and the op.
            w4 = g.integers(-8, 8, (R * H, n)).astype(np.int8)
            x4 = commfuse.pack_int4(np.ascontiguousarray(w4.T) if transposed else w4)
            p4 = commfuse.PackedWeight(x4, BS // R, x2_dtype="int4", transpose_x2=transposed)
            assert "x2 int4" in p4.description, p4.description
            kw4 = dict(transpose_x2=transposed, x2_dtype="int4")
            want, _ = commfuse.alltoall_quant_matmul(act, x4, s2, comm, R, **kw4)
            got, _ = commfuse.alltoall_quant_matmul(act, x4, s2, comm, R, packed_x2=p4, **kw4)
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
            # The same bits as ml_dtypes.int4 weights, which the op packs itself.
            w4t = np.ascontiguousarray(w4.T) if transposed else w4
            ref, _ = commfuse.alltoall_quant_matmul(act, w4t.astype(ml_dtypes.int4), s2, comm, R,
                                                    transpose_x2=transposed)
            np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))
            # alltoall_matmul: a 16-bit x2 packed the same way gives the same bits.
            wb = wa.astype(ml_dtypes.bfloat16)
            xb = np.ascontiguousarray(wb.T) if transposed else wb
            pb = commfuse.PackedWeight(xb.T if transposed else xb, BS // R)
            want, _ = commfuse.alltoall_matmul(act, xb, comm, R, transpose_x2=transposed)
            got, _ = commfuse.alltoall_matmul(act, xb, comm, R, transpose_x2=transposed,
                                              packed_x2=pb)
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
            if transposed:
                # x2 as the transposed view itself (no transpose_x2): passed as it is, so the
                # PackedWeight of that view matches (the wrapper copied it: "packed from
                # another x2").
                got, _ = commfuse.alltoall_matmul(act, xb.T, comm, R, packed_x2=pb)
                np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
                got, _ = commfuse.alltoall_quant_matmul(act, xa.T, s2, comm, R, packed_x2=pa)
                np.testing.assert_array_equal(got.view(np.uint16), want_q.view(np.uint16))
        return True


@pytest.mark.parametrize("world_size", [1, 2])
def test_int8_x2_prepared_ahead_gives_the_same_bits(world_size):
    assert run(_int8_body, world_size) == [True] * world_size
