"""Communicators and collectives through Python at world sizes 1, 2, 4: init (env:// via
spawn, tcp://), name / rank / world_size, every collective on every dtype it takes,
out= buffers, in-place all_reduce, destroy and context-manager use."""

import ml_dtypes
import numpy as np
import pytest

import commfuse
from ranks import WORLD_SIZES, run

# Data movement takes every dtype: (numpy dtype, dtype= for raw codes).
MOVE_DTYPES = [(np.float32, None), (np.float16, None), (ml_dtypes.bfloat16, None),
               (ml_dtypes.float8_e4m3fn, None), (ml_dtypes.float8_e5m2, None),
               (ml_dtypes.float8_e8m0fnu, None), (np.uint8, "hifloat8"), (np.uint8, "int4"),
               (np.int8, None), (np.int32, None), (np.int64, None)]
# Sums: float32, float16, bfloat16 (fp32 in rank order), int8 and int32 (exact, saturating).
SUM_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.int32]


def _codes(seed, shape, dt):
    """Arbitrary bit patterns of dt's width (any code is valid data to move)."""
    width = np.dtype(dt).itemsize
    raw = np.random.default_rng(seed).integers(0, 2**(8 * width), shape, dtype=np.uint64)
    return raw.astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]).view(dt)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def _collectives_body(rank):
    with commfuse.init() as comm:  # env:// from spawn
        R = comm.world_size
        assert (comm.rank, comm.world_size, comm.transport) == (rank, R, "shm")
        for i, (dt, name) in enumerate(MOVE_DTYPES):
            xs = [_codes(10 * i + s, (3, 4), dt) for s in range(R)]
            got = comm.all_gather(xs[rank], dtype=name)
            assert got.dtype == np.dtype(dt) and got.shape == (3 * R, 4)
            assert np.array_equal(_bits(got), _bits(np.concatenate(xs))), (dt, name)
            # all_to_all: block s of x goes to rank s.
            ys = [_codes(100 + 10 * i + s, (2 * R, 2), dt) for s in range(R)]
            out = np.empty_like(ys[rank])
            got = comm.all_to_all(ys[rank], out=out, dtype=name)
            assert got is out
            want = np.concatenate([ys[s][2 * rank:2 * rank + 2] for s in range(R)])
            assert np.array_equal(_bits(got), _bits(want)), (dt, name)
            # broadcast from the last rank, in place.
            buf = xs[rank].copy()
            assert comm.broadcast(buf, root=R - 1, dtype=name) is buf
            assert np.array_equal(_bits(buf), _bits(xs[R - 1]))
        for dt in SUM_DTYPES:
            xs = [np.arange(2 * R * 3).reshape(2 * R, 3) % 7 - 3 + s for s in range(R)]
            total = sum(xs)
            got = comm.all_reduce(xs[rank].astype(dt))
            assert got.dtype == np.dtype(dt)
            np.testing.assert_array_equal(got.astype(np.float64), total)
            got = comm.reduce_scatter(xs[rank].astype(dt))
            assert got.shape == (2, 3)
            np.testing.assert_array_equal(got.astype(np.float64), total[2 * rank:2 * rank + 2])
        # In place: out=x.
        x = np.full(1000, rank + 1, np.float32)
        assert comm.all_reduce(x, out=x) is x
        assert np.all(x == R * (R + 1) / 2)
        # int8 saturates instead of wrapping.
        assert np.all(comm.all_reduce(np.full(4, 100, np.int8)) == min(100 * R, 127))
        # Non-contiguous input: copied, then reduced.
        x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
        np.testing.assert_array_equal(comm.all_reduce(x), x * R)
        comm.barrier()
        return comm.name


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_collectives(world_size):
    names = run(_collectives_body, world_size)
    assert len(set(names)) == 1 and names[0].startswith("commfuse-")


def _tcp_body(rank, world_size, port):
    comm = commfuse.init(rank, world_size, init_method=f"tcp://127.0.0.1:{port}")
    assert repr(comm).startswith(f"<commfuse.Communicator {comm.name} rank {rank}/{world_size}")
    # The name is the operators' hcom.
    x = np.ones((2, 4), np.float32)
    output, _ = commfuse.all_gather_base_mm(x, np.ones((4, 1), np.float32), comm.name, world_size)
    assert np.all(output == 4)
    name = comm.name
    comm.destroy()
    comm.destroy()  # idempotent
    assert repr(comm) == "<commfuse.Communicator destroyed>"
    with pytest.raises(commfuse.InvalidArgument, match="destroyed"):
        comm.barrier()
    # The name is gone with it.
    with pytest.raises(commfuse.InvalidArgument, match="unknown group"):
        commfuse.all_gather_base_mm(x, np.ones((4, 1), np.float32), name, world_size)
    return name


def test_tcp_init_and_destroy():
    port = commfuse.free_port()
    names = run(_tcp_body, 2, 2, port)
    assert names[0] == names[1]
