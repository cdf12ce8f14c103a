"""Communicators and collectives through Python at world sizes 1, 2, 4: init (env:// via
spawn, tcp://), name / rank / world_size, every collective on every dtype it takes,
out= buffers, in-place all_reduce, destroy and context-manager use."""

import re
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import commfuse
from ranks import WORLD_SIZES, DLPackOnly, run

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
        # A 0-d array (a scalar) is one element: reduced and moved as such, results 0-d
        # (all_gather's (R,)); it once moved nothing and left the result unwritten.
        got = comm.all_reduce(np.array(rank + 1, np.float32))
        assert got.shape == () and got == R * (R + 1) / 2
        out = np.array(-7, np.int32)
        assert comm.all_reduce(np.array(rank, np.int32), out=out) is out and out == R * (R - 1) // 2
        np.testing.assert_array_equal(comm.all_gather(np.float32(rank)), np.arange(R))
        buf = np.array(rank, np.int64)
        comm.broadcast(buf, root=R - 1)
        assert buf == R - 1
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
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"all_gather_matmul: group '.*': the communicator was destroyed"):
        commfuse.all_gather_base_mm(x, np.ones((4, 1), np.float32), name, world_size)
    return name


def test_tcp_init_and_destroy():
    port = commfuse.free_port()
    names = run(_tcp_body, 2, 2, port)
    assert names[0] == names[1]


# Data movement only (all_gather, all_to_all, broadcast; sums reject them): each array's own
# numpy dtype names it, no dtype= needed, and results come back in that dtype.
DATA_MOVEMENT_DTYPES = [np.uint8, np.int16, np.uint16, np.bool_]


def _data(seed, shape, dt):
    """Every bit pattern of the integer types; bool holds 0/1 as numpy stores it."""
    if np.dtype(dt) == np.bool_:
        return np.random.default_rng(seed).integers(0, 2, shape).astype(np.bool_)
    return _codes(seed, shape, dt)


def _data_movement_body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        for i, dt in enumerate(DATA_MOVEMENT_DTYPES):
            for wrap in (lambda a: a, DLPackOnly):
                xs = [_data(10 * i + s, (5, 3), dt) for s in range(R)]
                got = comm.all_gather(wrap(xs[rank]))
                assert got.dtype == np.dtype(dt) and got.shape == (5 * R, 3), (dt, got.dtype)
                assert np.array_equal(_bits(got), _bits(np.concatenate(xs))), dt
                ys = [_data(100 + 10 * i + s, (2 * R, 3), dt) for s in range(R)]
                got = comm.all_to_all(wrap(ys[rank]))
                assert got.dtype == np.dtype(dt)
                want = np.concatenate([ys[s][2 * rank:2 * rank + 2] for s in range(R)])
                assert np.array_equal(_bits(got), _bits(want)), dt
                out = np.empty((5 * R, 3), dt)
                assert comm.all_gather(wrap(xs[rank]), out=out) is out
                assert np.array_equal(_bits(out), _bits(np.concatenate(xs))), dt
            for root in range(R):
                buf = _data(200 + 10 * i + rank, (7,), dt)
                assert comm.broadcast(buf, root=root) is buf
                assert np.array_equal(_bits(buf), _bits(_data(200 + 10 * i + root, (7,), dt)))
        # HiFloat8 codes still travel as uint8 with dtype= (and come back as uint8).
        codes = _codes(7, (2, 4), np.uint8)
        got = comm.all_gather(codes, dtype="hifloat8")
        assert got.dtype == np.uint8 and np.array_equal(got, np.concatenate([codes] * R))
        comm.barrier()


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_data_movement_dtypes(world_size):
    run(_data_movement_body, world_size)


def _sum_rejection_body(rank):
    """Every rank asks for a sum of each data-movement dtype: each gets InvalidArgument on its
    own, naming the op, its rank and the dtype (no rank waits for a peer)."""
    with commfuse.init() as comm:
        messages = []
        for dt in DATA_MOVEMENT_DTYPES:
            name = np.dtype(dt).name
            x = _data(1, (2 * comm.world_size, 4), dt)
            for op in ("all_reduce", "reduce_scatter"):
                with pytest.raises(commfuse.InvalidArgument) as info:
                    getattr(comm, op)(x)
                assert info.value.code == 161002
                assert re.match(rf"{op}\(rank {rank}\): dtype {name} cannot be summed "
                                r"\(only float32, float16, bfloat16, int8, int32\)",
                                info.value.message), info.value.message
                messages.append(info.value.message)
        return messages


@pytest.mark.parametrize("world_size", [1, 2])
def test_data_movement_dtypes_cannot_be_summed(world_size):
    outcomes = run(_sum_rejection_body, world_size)
    assert all(len(m) == 8 for m in outcomes)


def test_array_dtypes_name_the_data_movement_dtypes():
    from commfuse._tensor import tensor_ref

    for dt, name in [(np.uint8, "uint8"), (np.int16, "int16"), (np.uint16, "uint16"),
                     (np.bool_, "bool")]:
        assert tensor_ref(np.zeros(3, dt)).dtype == name
        assert tensor_ref(DLPackOnly(np.zeros(3, dt))).dtype == name
        assert commfuse._commfuse.TensorRef(np.zeros(3, dt)).dtype == name
    # A uint8 array is uint8 unless dtype= names the format its codes are in.
    codes = np.zeros((2, 4), np.uint8)
    assert tensor_ref(codes, "hifloat8").dtype == "hifloat8"
    packed = tensor_ref(codes, "int4")
    assert packed.dtype == "int4" and packed.shape == (2, 8)
    # Still not commfuse dtypes: named in the message.
    with pytest.raises(commfuse.InvalidArgument, match="uint32 is not a commfuse format"):
        tensor_ref(np.zeros(3, np.uint32))
    # A big-endian input is its format, copied to native order (was "dtype >f4 is not a
    # commfuse format"); as an output it cannot be written in place.
    big = tensor_ref(np.ones(3, ">f4"))
    assert big.dtype == "float32" and big.shape == (3,)
    with pytest.raises(commfuse.InvalidArgument, match="non-native byte order"):
        tensor_ref(np.ones(3, ">f4"), output=True)


@pytest.mark.parametrize("dt, other", [(ml_dtypes.bfloat16, "float16"),
                                       (ml_dtypes.float8_e4m3fn, "float8_e5m2"),
                                       (ml_dtypes.float8_e4m3fn, "hifloat8"),
                                       (ml_dtypes.float8_e5m2, "int8")])
def test_a_format_array_is_not_codes_of_another(dt, other):
    # ml_dtypes arrays travel as unsigned views: dtype= naming another format of the same
    # width read bfloat16 ones as float16 (1.0 summed to 1.875) and e4m3 as e5m2, silently.
    from commfuse._tensor import tensor_ref

    x = np.ones(4, dt)
    with pytest.raises(commfuse.InvalidArgument, match=f"cannot hold {other}"):
        tensor_ref(x, other)
    assert tensor_ref(x, commfuse._dtypes.format_of(x.dtype)).dtype == commfuse._dtypes.format_of(
        x.dtype)
    assert tensor_ref(x.view(np.uint8 if x.itemsize == 1 else np.uint16), other).dtype == other


def _destroy_while_in_use_body(rank):
    # destroy() in one thread while others are inside a collective and an operator on the
    # same communicator: the calls in flight finish (they hold it), the next ones raise
    # InvalidArgument naming the call; freeing it under them once crashed the process.
    comm = commfuse.init()
    name = comm.name
    x = np.ones(1 << 16, np.float32)
    x1, w = np.ones((4, 64), np.float32), np.ones((64, 64), np.float32)
    errors, started = [], threading.Barrier(3)
    one_at_a_time = threading.Lock()  # a call from a second thread meanwhile is refused

    def loop(call):
        started.wait()
        try:
            while True:
                with one_at_a_time:
                    call()
        except commfuse.InvalidArgument as e:
            errors.append(str(e))

    threads = [threading.Thread(target=loop, args=(lambda: comm.all_reduce(x),)),
               threading.Thread(target=loop,
                                args=(lambda: commfuse.all_gather_base_mm(x1, w, name, 1),))]
    for t in threads:
        t.start()
    started.wait()
    time.sleep(0.05)
    comm.destroy()
    for t in threads:
        t.join()
    return sorted(errors)


def test_destroy_while_calls_are_in_flight():
    for _ in range(3):
        [errors] = run(_destroy_while_in_use_body, 1)
        assert len(errors) == 2
        assert errors[0].startswith("all_gather_matmul: group 'commfuse-"), errors
        assert errors[0].endswith("': the communicator was destroyed"), errors
        assert errors[1] == "all_reduce: the communicator was destroyed", errors
