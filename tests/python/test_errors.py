"""Errors through Python: the class follows the SPEC §0 status, .code carries it, the
message names the op, the rank and the argument; an argument error on one rank fails its
peers at once (RuntimeFailure naming that rank) instead of leaving them waiting."""

import os
import pickle
import re

import ml_dtypes
import numpy as np
import pytest

import commfuse
from ranks import run

F32 = np.float32


def test_error_classes():
    for cls, code, base in [(commfuse.NullPointerError, 161001, None),
                            (commfuse.InvalidArgument, 161002, ValueError),
                            (commfuse.RuntimeFailure, 361001, RuntimeError),
                            (commfuse.InternalError, 561000, None)]:
        assert issubclass(cls, commfuse.Error) and issubclass(cls, Exception)
        if base is not None:
            assert issubclass(cls, base)
        e = cls("boom")
        assert e.code == code and e.message == "boom" and str(e) == "boom"
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is cls and back.code == code and back.message == "boom"
    e = commfuse.Error("custom", 161002)
    assert e.code == 161002 and e.status == "PARAM_INVALID"
    e = commfuse.Error(361001, "code first")  # issue 7's Error(code, message)
    assert e.code == 361001 and e.message == "code first" and str(e) == "code first"
    assert commfuse.InvalidArgument(161002, "x").message == "x"
    assert commfuse.InvalidArgument.__module__ == "commfuse"


def _k_zero_body(rank):
    with commfuse.init() as comm:
        x1, x2 = np.ones((3, 0), F32), np.ones((0, 5), F32)
        return [_outcome(lambda: commfuse.all_gather_base_mm(x1, x2, comm.name, 1)),
                _outcome(lambda: commfuse.mm_reduce_scatter_base(x1, x2, comm.name, 1)),
                _outcome(lambda: commfuse.mm_all_reduce_base(x1, x2, comm.name))]


def test_an_empty_dimension_is_named_not_its_layout():
    # A (3, 0) x1 has no layout to check: the message says k is 0 (SPEC §0: what was
    # expected and what was given), not that numpy's strides are wrong.
    [outcomes] = run(_k_zero_body, 1)
    for op, outcome in zip(["all_gather_matmul", "matmul_reduce_scatter", "matmul_all_reduce"],
                           outcomes):
        assert outcome == ("InvalidArgument", 161002,
                           f"{op}(rank 0): x1 dim 1 (k) is 0 but must be >= 1"), outcome


def _bias_body(rank, m, n):
    with commfuse.init() as comm:
        R = comm.world_size
        x, w = np.ones((m, 4), F32), np.ones((4, n), F32)
        mine = np.full(n, 10.0 * (rank + 1), F32)
        same = np.full(n, 10.0, F32)
        outcomes = []
        for bias in (mine, same if rank else None):  # different values; absent on rank 0
            outcomes.append(_outcome(lambda: commfuse.mm_all_reduce_base(x, w, comm.name,
                                                                         bias=bias)))
            outcomes.append(_outcome(lambda: commfuse.mm_reduce_scatter_base(
                x, w, comm.name, R, bias=bias)))
        usable = comm.usable
        out = commfuse.mm_all_reduce_base(x, w, comm.name, bias=same)
        return outcomes, usable, out.tolist()


@pytest.mark.parametrize("m,n", [(4, 8), (64, 64)])
def test_ranks_must_pass_the_same_bias(m, n):
    # The bias is added once (SPEC §2): ranks passing different values would each see their
    # own, or each row block its owner's, depending on the schedule. Every rank fails the
    # call naming the bias; the communicator stays usable, and the same bias works.
    for rank, (outcomes, usable, out) in enumerate(run(_bias_body, 2, m, n)):
        for outcome in outcomes:
            assert outcome[:2] == ("RuntimeFailure", 361001), outcome
            assert re.search(r"rank \d passed bias \(a digest of its values\) (none|-?\d+), rank "
                             rf"{rank} passed (none|-?\d+) \(every rank must pass the same bias",
                             outcome[2]), outcome[2]
        assert usable
        assert out == [[2 * 4 + 10.0] * n] * m, out[0][:4]


def _overlap_body(rank):
    with commfuse.init() as comm:
        R, m = comm.world_size, 4
        x1 = np.full((m, 8), rank + 1, F32)
        w = np.ones((8, m * R), F32)
        gather = np.zeros((m * R, 8), F32)
        a2a_x = np.ones((m * R, 4), F32)
        square = np.ones((m * R, m * R), F32)  # x2 (k, n) with k = n = m·R: output's shape
        calls = {
            # output over x2
            "output and x2": lambda: commfuse.all_gather_base_mm(
                np.ones((m, m * R), F32), square, comm.name, R, out=square),
            # x1 over another rank's block of gather_out
            "gather_out and x1": lambda: commfuse.all_gather_base_mm(
                gather[((rank + 1) % R) * m:((rank + 1) % R + 1) * m], w, comm.name, R,
                gather_out=gather),
            # output over x1, in place (k = n): wrong over MPI once a piece's sum was written
            # before later pieces read x1 (review of the first version of this check)
            "output and x1": lambda: commfuse.mm_all_reduce_base(
                inplace := np.ones((m, 8), F32), np.ones((8, 8), F32), comm.name, out=inplace),
            # alltoall_out over x1
            "alltoAllOutOptional and x1": lambda: commfuse.alltoall_matmul(
                a2a_x, np.ones((4 * R, 4), F32), comm.name, R,
                alltoall_out=a2a_x.reshape(m, 4 * R)),
        }
        outcomes = {k: _outcome(f) for k, f in calls.items()}
        # x1 as this rank's own block of gather_out: the in-place all_gather, supported.
        gather[rank * m:(rank + 1) * m] = x1
        out, g = commfuse.all_gather_base_mm(gather[rank * m:(rank + 1) * m], w, comm.name, R,
                                             gather_out=gather)
        return outcomes, comm.usable, g.tolist(), out.tolist()


def test_outputs_that_share_memory_with_inputs_are_rejected():
    # An op reads its inputs while it writes its outputs, piece by piece: a shared byte gave
    # silently wrong results, different per rank and per schedule. Each case is PARAM_INVALID
    # naming both tensors, on every rank (all pass the same kind of overlap); the one in-place
    # form, all_gather's (x1 = this rank's block of gather_out), still works.
    R = 2
    for rank, (outcomes, usable, gathered, out) in enumerate(run(_overlap_body, R)):
        for pair, outcome in outcomes.items():
            assert outcome is not None and outcome[:2] == ("InvalidArgument", 161002), (pair,
                                                                                     outcome)
            assert f"{pair} share memory" in outcome[2], outcome[2]
        assert usable
        assert gathered == [[float(r + 1)] * 8 for r in range(R) for _ in range(4)]
        assert out == [[8.0 * (r + 1)] * (4 * R) for r in range(R) for _ in range(4)]


def test_errors_without_a_group():
    # No communicator needed: the group lookup fails first, on this rank only.
    x, w = np.ones((2, 4), F32), np.ones((4, 3), F32)
    with pytest.raises(commfuse.InvalidArgument, match="unknown group 'nope'") as info:
        commfuse.all_gather_base_mm(x, w, "nope", 1)
    assert info.value.code == 161002
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"^mm_all_reduce_base: hcom must be a communicator name \(str\) or a "
                             r"Communicator, got int$"):
        commfuse.mm_all_reduce_base(x, w, 17)
    # Local functions: a flag or a dtype of the wrong kind is named (bool() of an array raised
    # a bare ValueError; np.dtype(None) is float64, which the message then named).
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"^convert: saturate must be a bool, got ndarray array\(\[1, 0\]\)$"):
        commfuse.convert(x, "bfloat16", saturate=np.array([1, 0]))
    with pytest.raises(commfuse.InvalidArgument, match=r"^convert: dtype is None, not a dtype$"):
        commfuse.convert(x, None)
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"^PackedWeight: transpose_x2 must be a bool, got int 2$"):
        commfuse.PackedWeight(w, transpose_x2=2)
    for flag in (1, np.int64(0), np.array(True), np.bool_(False)):  # what bool() took, less
        assert commfuse.convert(x, "bfloat16", saturate=flag).shape == x.shape  # arrays, None
    with pytest.raises(commfuse.InvalidArgument, match="not supported"):
        commfuse.init(0, 1, init_method="udp://x:1")
    with pytest.raises(commfuse.InvalidArgument, match="needs rank and world_size"):
        commfuse.init(init_method="tcp://127.0.0.1:1")
    with pytest.raises(commfuse.InvalidArgument, match="rank is 3 but world_size is 2"):
        commfuse.init(3, 2, init_method="tcp://127.0.0.1:1")
    # Not truncated, parsed or left to the binding's TypeError: named.
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"^init: rank must be an integer, got str 'zero'$"):
        commfuse.init("zero", 1, init_method="tcp://127.0.0.1:1")
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"^init: world_size must be an integer, got float 1\.5$"):
        commfuse.init(0, 1.5, init_method="tcp://127.0.0.1:1")
    with pytest.raises(commfuse.InvalidArgument,
                       match=r"^init: world_size is 2147483648, outside the 32-bit signed range$"):
        commfuse.init(0, 2**31, init_method="tcp://127.0.0.1:1")


def _outcome(fn):
    """(class name, code, message) of what fn raised, or None."""
    try:
        fn()
    except commfuse.Error as e:
        return type(e).__name__, e.code, e.message
    return None


def _rejection_body(rank, case):
    """Rank 1 passes a bad argument, rank 0 a good one; both report what they got, whether
    the communicator is still usable, and the result of a good call made next."""
    with commfuse.init() as comm:
        R = comm.world_size
        bad = rank == 1
        x = np.ones((2, 8), F32)
        w = np.ones((8, 4), F32)
        if case == "k_mismatch":
            op = lambda: commfuse.all_gather_base_mm(x, np.ones((6 if bad else 8, 4), F32),
                                                     comm.name, R)
        elif case == "dtype_mismatch":
            op = lambda: commfuse.mm_all_reduce_base(x, w.astype(np.float16) if bad else w,
                                                     comm.name)
        elif case == "world_size":
            op = lambda: commfuse.all_gather_base_mm(x, w, comm.name, 3 if bad else R)
        elif case == "gather_index":
            op = lambda: commfuse.all_gather_base_mm(x, w, comm.name, R, gather_index=int(bad))
        elif case == "comm_turn":
            op = lambda: commfuse.mm_reduce_scatter_base(x, w, comm.name, R,
                                                         comm_turn=65 if bad else 0)
        elif case == "reduce_op":
            op = lambda: commfuse.mm_reduce_scatter_base(x, w, comm.name, R,
                                                         reduce_op="max" if bad else "sum")
        elif case == "m_not_multiple":
            op = lambda: commfuse.mm_reduce_scatter_base(np.ones((3 if bad else 2, 8), F32), w,
                                                         comm.name, R)
        elif case == "out_shape":
            op = lambda: commfuse.mm_all_reduce_base(x, w, comm.name,
                                                     out=np.empty((2, 5 if bad else 4), F32))
        elif case == "out_read_only":
            out = np.empty((2, 4), F32)
            out.flags.writeable = not bad
            op = lambda: commfuse.mm_all_reduce_base(x, w, comm.name, out=out)
        elif case == "python_side_dtype":  # found in Python, before the C++ op
            op = lambda: commfuse.all_gather_base_mm(
                x.astype(np.uint32) if bad else x, w, comm.name, R)
        elif case == "op_data_movement_dtype":  # uint8 is a commfuse dtype, not a matmul input
            op = lambda: commfuse.all_gather_base_mm(
                x.astype(np.uint8) if bad else x, w, comm.name, R)
        elif case == "quant_scales_shape":
            op = lambda: commfuse.quant_all_reduce(np.ones((2, 128), np.int8),
                                                   np.ones((2, 2 if bad else 1), F32), comm.name)
        elif case == "quant_rows":
            op = lambda: commfuse.quant_reduce_scatter(np.ones((3 if bad else 2, 128), np.int8),
                                                       np.ones((3 if bad else 2, 1), F32), comm)
        elif case == "a2a_combination":
            op = lambda: commfuse.alltoall_quant_matmul(
                np.ones((2, 8), np.float16), np.ones((2 * R * 4, 4), np.int8), np.ones(4, F32),
                comm.name, R, x1_quant_mode=3 if bad else 7)
        elif case == "a2a_world_size":
            op = lambda: commfuse.alltoall_matmul(x, np.ones((8 * R, 4), F32), comm.name,
                                                  3 if bad else R)
        elif case == "collective_count":
            op = lambda: comm.all_reduce(x, out=np.empty(5 if bad else (2, 8), F32))
        elif case == "collective_out_shape":  # the right element count in another shape
            op = lambda: comm.all_gather(x, out=np.empty((8, 4) if bad else (4, 8), F32))
        elif case == "a2a_flag_array":  # bool() of it would raise ValueError
            op = lambda: commfuse.alltoall_matmul(x, np.ones((8 * R, 4), F32), comm.name, R,
                                                  transpose_x2=np.array([1, 0]) if bad else False)
        elif case == "a2a_flag_none":  # bool() of it would quietly be False
            op = lambda: commfuse.alltoall_quant_matmul(
                np.ones((2, 8), np.float16), np.ones((R * 8, 4), np.int8), np.ones(4, F32),
                comm.name, R, return_alltoall_out=None if bad else False)
        elif case == "output_dtype_none":  # np.dtype(None) is float64: named as None
            op = lambda: commfuse.quant_all_reduce(np.ones((2, 128), np.int8),
                                                   np.ones((2, 1), F32), comm.name,
                                                   output_dtype=None if bad else np.float32)
        elif case == "collective_dtype":
            op = lambda: comm.all_reduce(x.astype(ml_dtypes.float8_e4m3fn) if bad else x)
        elif case == "collective_bool_sum":
            op = lambda: comm.reduce_scatter(x.astype(np.bool_) if bad else x)
        elif case == "collective_op":
            op = lambda: comm.all_reduce(x, op="max" if bad else "sum")
        elif case == "collective_split":
            op = lambda: comm.reduce_scatter(np.ones(3 if bad else 4, F32))
        # Scalar arguments of the wrong type or range: rejected in Python, for the group.
        elif case == "world_size_none":
            op = lambda: commfuse.all_gather_base_mm(x, w, comm.name, None if bad else R)
        elif case == "world_size_float":
            op = lambda: commfuse.mm_reduce_scatter_base(x, w, comm.name, 2.0 if bad else R)
        elif case == "comm_turn_str":
            op = lambda: commfuse.mm_all_reduce_base(x, w, comm.name, comm_turn="1" if bad else 0)
        elif case == "comm_turn_huge":
            op = lambda: commfuse.all_gather_base_mm(x, w, comm.name, R,
                                                     comm_turn=2**70 if bad else 0)
        elif case == "a2a_world_size_none":
            op = lambda: commfuse.alltoall_matmul(x, np.ones((8 * R, 4), F32), comm.name,
                                                  None if bad else R)
        elif case == "broadcast_root_huge":
            op = lambda: comm.broadcast(np.ones(4, F32), root=2**40 if bad else 0)
        elif case == "record_field_out":  # strides not in whole float32 elements
            rec = np.zeros((2, 4), [("w", F32), ("p", np.uint8)])
            op = lambda: commfuse.mm_all_reduce_base(x, w, comm.name,
                                                     out=rec["w"] if bad else None)
        elif case == "none_input":  # SPEC §0: a required tensor that is null: PARAM_NULLPTR
            op = lambda: commfuse.mm_all_reduce_base(None if bad else x, w, comm.name)
        elif case == "none_broadcast":
            op = lambda: comm.broadcast(None if bad else np.ones(4, F32))
        outcome = _outcome(op)
        return outcome, comm.usable, comm.all_reduce(np.full(4, rank + 1, F32)).tolist()


REJECTIONS = {
    "k_mismatch": r"all_gather_matmul\(rank 1\): x2 dim 0 is 6 but x1 dim 1 is 8",
    "dtype_mismatch": r"matmul_all_reduce\(rank 1\): x2 dtype is float16",
    "world_size": r"all_gather_matmul\(rank 1\): world_size is 3 but group has 2 ranks",
    "gather_index": r"gather_index=1 is not supported",
    "comm_turn": r"comm_turn is 65 but must be 0 \(automatic\) or 1\.\.64",
    "reduce_op": r"reduce_op is 'max' but only \"sum\" is supported",
    "m_not_multiple": r"x1 dim 0 \(m\) is 3 but must be a multiple of the world size 2",
    "out_shape": r"matmul_all_reduce\(rank 1\): output",
    "out_read_only": r"matmul_all_reduce\(rank 1\): output is read-only",
    "python_side_dtype": r"all_gather_base_mm\(rank 1\): input: array dtype uint32 is not a "
                         r"commfuse format; raw codes need dtype=",
    "op_data_movement_dtype": r"all_gather_matmul\(rank 1\): x1 dtype is uint8 but must be "
                              r"float16, bfloat16, float32, or a quantized dtype",
    "quant_scales_shape": r"quant_all_reduce\(rank 1\): scales",
    "quant_rows": r"quant_reduce_scatter\(rank 1\): ",
    "a2a_combination": r"alltoall_quant_matmul\(rank 1\): unsupported combination x1 float16, "
                       r"x2 int8, x1QuantMode 3",
    "a2a_world_size": r"alltoall_matmul\(rank 1\): world_size is 3 but group has 2 ranks",
    "collective_count": r"all_reduce\(rank 1\): out has shape \(5,\) but the result's is "
                        r"\(2, 8\)",
    "collective_out_shape": r"all_gather\(rank 1\): out has shape \(8, 4\) but the result's is "
                            r"\(4, 8\)",
    "a2a_flag_array": r"alltoall_matmul\(rank 1\): transpose_x2 must be a bool, got ndarray",
    "a2a_flag_none": r"alltoall_quant_matmul\(rank 1\): return_alltoall_out must be a bool, "
                     r"got NoneType None",
    "output_dtype_none": r"quant_all_reduce\(rank 1\): output_dtype is None, not a dtype",
    "collective_dtype": r"all_reduce\(rank 1\): dtype float8_e4m3fn cannot be summed",
    "collective_bool_sum": r"reduce_scatter\(rank 1\): dtype bool cannot be summed \(only ",
    "collective_op": r"all_reduce\(rank 1\): op is 'max' but only 'sum' is supported",
    "collective_split": r"reduce_scatter\(rank 1\): x has 3 elements, not a multiple",
    "world_size_none": r"all_gather_base_mm\(rank 1\): world_size must be an integer, got "
                       r"NoneType None",
    "world_size_float": r"mm_reduce_scatter_base\(rank 1\): world_size must be an integer, "
                        r"got float 2\.0",
    "comm_turn_str": r"mm_all_reduce_base\(rank 1\): comm_turn must be an integer, got str '1'",
    "comm_turn_huge": r"all_gather_base_mm\(rank 1\): comm_turn is 1180591620717411303424, "
                      r"outside the 64-bit signed range",
    "a2a_world_size_none": r"alltoall_matmul\(rank 1\): world_size must be an integer",
    "record_field_out": r"mm_all_reduce_base\(rank 1\): out: array strides \(20, 5\) \(bytes\) "
                        r"are not multiples of its itemsize 4",
    "broadcast_root_huge": r"broadcast\(rank 1\): root is 1099511627776, outside the 32-bit",
}


# Rejections whose status is PARAM_NULLPTR rather than PARAM_INVALID.
NULL_REJECTIONS = {
    "none_input": r"mm_all_reduce_base\(rank 1\): x1 is None \(a required tensor\)",
    "none_broadcast": r"broadcast\(rank 1\): x is None \(a required tensor\)",
}


@pytest.mark.parametrize("case", list(REJECTIONS) + list(NULL_REJECTIONS))
def test_rejection_fails_the_call_not_the_group(case):
    outcomes = run(_rejection_body, 2, case)
    (bad, _, _), (good, _, _) = outcomes[1], outcomes[0]
    status = ("NullPointerError", 161001) if case in NULL_REJECTIONS else ("InvalidArgument", 161002)
    pattern = NULL_REJECTIONS.get(case) or REJECTIONS[case]
    assert bad is not None and bad[:2] == status, bad
    assert re.search(pattern, bad[2]), bad[2]
    # The peer did not wait for the deadline: it failed naming rank 1's reason.
    assert good is not None and good[:2] == ("RuntimeFailure", 361001), good
    assert "rank 1 rejected" in good[2] and re.search(pattern, good[2]), good[2]
    # Nothing was sent: the communicator is usable on both ranks and the next call works.
    for _, usable, after in outcomes:
        assert usable and after == [3.0] * 4, (usable, after)


def _algo_changed_body(rank):
    """Every rank forces all_reduce:one_shot at creation; rank 1 then forces a name all_reduce
    does not have for one call (COMMFUSE_ALGO is read again per call while it forces)."""
    os.environ["COMMFUSE_ALGO"] = "all_reduce:one_shot"
    with commfuse.init() as comm:
        if rank == 1:
            os.environ["COMMFUSE_ALGO"] = "all_reduce:bogus"
        got = _outcome(lambda: comm.all_reduce(np.full(4, 10.0 * (rank + 1), F32)))
        os.environ["COMMFUSE_ALGO"] = "all_reduce:one_shot"
        return got, comm.usable, comm.all_reduce(np.full(4, rank + 1, F32)).tolist()


def test_a_forced_algorithm_one_rank_cannot_run_fails_the_call_on_every_rank():
    # Rank 1 alone had failed; rank 0's call then took rank 1's next call as its own and
    # returned its sum (no error, wrong data), and the calls stayed paired one off.
    (good, _, _), (bad, _, _) = outcomes = run(_algo_changed_body, 2)
    text = "COMMFUSE_ALGO: all_reduce has no algorithm 'bogus' (one_shot|two_shot)"
    assert bad is not None and bad[0] == "InvalidArgument" and text in bad[2], bad
    assert good is not None and good[0] == "RuntimeFailure", good
    assert "rank 1 rejected the call" in good[2] and text in good[2], good
    for _, usable, after in outcomes:
        assert usable and after == [3.0] * 4, (usable, after)


class _Unconvertible:
    """An argument whose conversion raises an exception that is not a commfuse.Error."""

    def __array__(self, *args, **kwargs):
        raise ValueError("cannot be an array")


def _foreign_exception_body(rank):
    """Rank 1's argument raises ValueError while the call's arguments are prepared: it
    propagates as it is, and rank 0, already in the op, fails at once naming rank 1."""
    with commfuse.init() as comm:
        x = np.ones((2, 8), F32)
        w = np.ones((8, 4), F32)
        try:
            commfuse.mm_all_reduce_base(_Unconvertible() if rank == 1 else x, w, comm.name)
            got = None
        except ValueError as e:
            got = ("ValueError", str(e))
        except commfuse.Error as e:
            got = (type(e).__name__, e.message)
        # An input field of a record array (strides not in whole elements) is copied.
        rec = np.zeros((8, 4), [("w", F32), ("p", np.uint8)])
        rec["w"] = 1
        y = commfuse.mm_all_reduce_base(x, rec["w"], comm.name)
        return got, comm.usable, y.tolist()


def test_a_foreign_exception_fails_the_peers_too():
    outcomes = run(_foreign_exception_body, 2)
    assert outcomes[1][0] == ("ValueError", "cannot be an array"), outcomes[1]
    name, message = outcomes[0][0]
    assert name == "RuntimeFailure" and "rank 1 rejected" in message, message
    assert "ValueError: cannot be an array" in message, message
    for _, usable, y in outcomes:
        assert usable and y == [[16.0] * 4] * 2, (usable, y)


def _abort_body(rank):
    with commfuse.init() as comm:
        x = np.ones(4, F32)
        mismatch = _outcome(lambda: comm.all_reduce(np.ones(8 if rank else 4, F32)))
        usable_after_mismatch = comm.usable
        if rank == 1:
            comm.abort("test")
        aborted = _outcome(lambda: comm.all_reduce(x))
        return mismatch, usable_after_mismatch, comm.usable, comm.failure, aborted


def _long_abort_body(rank):
    """An abort reason longer than the transport's message, in 3-byte characters: cut
    inside one, it still reaches the peer as a RuntimeFailure (the cut character replaced)."""
    with commfuse.init() as comm:
        if rank == 1:
            comm.abort("节点超时：" * 60)
        return _outcome(lambda: comm.all_reduce(np.ones(4, F32)))


def test_a_long_non_ascii_abort_reason_stays_a_runtime_failure():
    for rank, got in enumerate(run(_long_abort_body, 2)):
        assert got is not None and got[:2] == ("RuntimeFailure", 361001), (rank, got)
        assert "节点超时：节点超时" in got[2], (rank, got[2][:200])


def _watchdog_body(rank):
    import threading
    import time
    with commfuse.init() as comm:
        x = np.ones(4, F32)
        comm.all_reduce(x)  # every rank is set up
        if rank == 1:  # late: rank 0's call waits for it until the watchdog aborts
            time.sleep(4)
            return _outcome(lambda: comm.all_reduce(x)), 0.0, comm.usable, comm.failure
        watchdog = threading.Timer(0.3, comm.abort, args=("watchdog",))
        watchdog.start()
        start = time.monotonic()
        outcome = _outcome(lambda: comm.all_reduce(x))
        elapsed = time.monotonic() - start
        watchdog.join()
        return outcome, elapsed, comm.usable, comm.failure


def test_abort_from_another_thread_ends_the_call_in_flight():
    # ncclCommAbort's watchdog use: the call blocked on a late peer fails with the abort's
    # reason long before that peer arrives (4 s; the deadline is COMMFUSE_TIMEOUT_S), and the
    # late peer's call then fails naming rank 0.
    (mine, elapsed, usable, failure), (late, _, _, _) = run(_watchdog_body, 2)
    assert mine[:2] == ("RuntimeFailure", 361001) and "watchdog" in mine[2], mine
    assert elapsed < 3.0, elapsed
    assert not usable and "rank 0 aborted the communicator: watchdog" in failure, failure
    assert late[:2] == ("RuntimeFailure", 361001) and "rank 0" in late[2], late


def _ctrl_c_body(rank, handler_raises):
    import os
    import signal
    import threading
    import time
    with commfuse.init() as comm:
        x = np.ones(4, F32)
        comm.all_reduce(x)  # every rank is set up
        if rank == 1:  # late: rank 0's call waits for it when Ctrl-C comes
            time.sleep(4 if handler_raises else 1.5)
            return _outcome(lambda: comm.all_reduce(x)), 0.0, comm.usable, comm.failure, None
        hits = []
        # Python's own handler, also where the test runs with SIGINT ignored (a background
        # job of a non-interactive shell inherits that, and Python then keeps it ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if not handler_raises:
            signal.signal(signal.SIGINT, lambda signum, frame: hits.append(signum))
        ctrl_c = threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT))
        ctrl_c.start()
        start = time.monotonic()
        try:
            y = comm.all_reduce(x)
            outcome = ("returned", y.tolist(), hits)
        except KeyboardInterrupt as e:
            outcome = ("KeyboardInterrupt", getattr(e, "__notes__", []), hits)
        elapsed = time.monotonic() - start
        ctrl_c.join()
        return outcome, elapsed, comm.usable, comm.failure, None


def test_ctrl_c_ends_a_call_waiting_for_a_late_peer():
    # Python runs signal handlers only between bytecodes: without the library's interrupt
    # check the call (GIL released) would wait for the late peer (4 s here; by default up to
    # COMMFUSE_TIMEOUT_S, 300 s) before KeyboardInterrupt. With it, KeyboardInterrupt comes
    # within the check's 100 ms period, the communicator is unusable, and the late peer's
    # call fails at once naming rank 0 and why.
    (mine, elapsed, usable, failure, _), (late, _, _, _, _) = run(_ctrl_c_body, 2, True)
    assert mine[0] == "KeyboardInterrupt", mine
    assert any("all_reduce(rank 0): interrupted (KeyboardInterrupt) while waiting for rank 1"
               in note for note in mine[1]), mine
    assert elapsed < 3.0, elapsed
    assert not usable and "interrupted (KeyboardInterrupt)" in failure, failure
    assert late[:2] == ("RuntimeFailure", 361001), late
    assert "rank 0 failed" in late[2] and "KeyboardInterrupt" in late[2], late


def test_a_signal_handler_that_does_not_raise_leaves_the_call_waiting():
    # The check runs Python's handler; one that returns normally ends nothing: the call
    # completes when the late peer comes, with the right sum, and the group stays usable.
    (mine, _, usable, failure, _), (late, _, late_usable, _, _) = run(_ctrl_c_body, 2, False)
    assert mine[0] == "returned" and mine[1] == [2.0] * 4, mine
    assert mine[2] == [2], mine  # the handler ran once (SIGINT is 2)
    assert usable and failure == "", failure
    assert late is None and late_usable, late


def _ctrl_c_in_init_body(_, rank, port):
    import os
    import signal
    import threading
    import time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in _ctrl_c_body
    ctrl_c = threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT))
    ctrl_c.start()
    start = time.monotonic()
    try:
        commfuse.init(rank, 2, f"tcp://127.0.0.1:{port}")
        outcome = ("returned", [])
    except KeyboardInterrupt as e:
        outcome = ("KeyboardInterrupt", getattr(e, "__notes__", []))
    elapsed = time.monotonic() - start
    ctrl_c.join()
    return outcome, elapsed


@pytest.mark.parametrize("rank,root", [(0, "none"), (1, "none"), (1, "silent")])
def test_ctrl_c_ends_init_waiting_for_a_missing_rank(rank, root):
    # Rank 0 alone waits for rank 1 to connect, rank 1 alone retries reaching rank 0: both
    # waited until COMMFUSE_TIMEOUT_S with Ctrl-C pressed; the bootstrap's waits now poll the
    # interrupt check too. root "silent": a listener that never answers holds the port, so
    # rank 1 waits for the group's confirmation (its note named neither the rank nor what it
    # waited for: "interrupted (KeyboardInterrupt) while waiting on a socket").
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    if root == "silent":
        s.listen(4)  # held while the rank runs
    else:
        s.close()  # the port free again, no one on it
    try:
        (outcome, elapsed), = run(_ctrl_c_in_init_body, 1, rank, port)
    finally:
        s.close()
    assert outcome[0] == "KeyboardInterrupt", outcome
    want = ("to connect" if rank == 0
            else f"bootstrap(rank 1): interrupted (KeyboardInterrupt) while waiting for rank 0 at "
                 f"127.0.0.1:{port} to confirm the group" if root == "silent"
            else "trying to reach rank 0")
    assert any("interrupted (KeyboardInterrupt)" in n and want in n for n in outcome[1]), outcome
    assert elapsed < 3.0, elapsed


def _ctrl_c_outside_the_bindings_body(rank, port):
    import ctypes
    import os
    import signal
    import threading
    import time
    # The library the package loaded (by its soname: no path search), called through ctypes:
    # a wait outside the package's bindings, where nothing would raise a handler's exception.
    lib = ctypes.CDLL("libcommfuse.so.0")
    lib.commfuseAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                      ctypes.c_int, ctypes.c_void_p]
    lib.commfuseCommInitRank.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                         ctypes.POINTER(ctypes.c_void_p)]
    comm = ctypes.c_void_p()
    assert lib.commfuseCommInitRank(rank, 2, f"tcp://127.0.0.1:{port}".encode(),
                                    ctypes.byref(comm)) == 0
    x, y = np.ones(4, F32), np.zeros(4, F32)
    assert lib.commfuseAllReduce(x.ctypes.data, y.ctypes.data, 4, 0, comm) == 0
    if rank == 1:  # late by 1.5 s for rank 0's second call
        time.sleep(1.5)
        return lib.commfuseAllReduce(x.ctypes.data, y.ctypes.data, 4, 0, comm), None
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in _ctrl_c_body
    threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT)).start()
    try:
        rc = lib.commfuseAllReduce(x.ctypes.data, y.ctypes.data, 4, 0, comm)
        first = ("returned", rc)
    except KeyboardInterrupt:  # Python's, when the call returned
        first = ("KeyboardInterrupt", None)
    # A later call through the package must not raise a leftover of it.
    with commfuse.init(0, 1, f"tcp://127.0.0.1:{port + 1}") as c1:
        later = c1.all_reduce(np.ones(2, F32)).tolist()
    return first, later


def test_ctrl_c_during_a_call_outside_the_bindings_stays_pythons():
    # The check is process-wide, but only calls made through the package's bindings run
    # Python's handlers from a wait: here the ctypes call completes when rank 1 comes, Python
    # raises KeyboardInterrupt as it returns (its usual rule), and nothing is left pending
    # (before: the call failed "interrupted", no KeyboardInterrupt came, and the next,
    # successful call raised it).
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (first, later), (late_rc, _) = run(_ctrl_c_outside_the_bindings_body, 2, port)
    assert first == ("KeyboardInterrupt", None), first
    assert later == [1.0, 1.0], later
    assert late_rc == 0, late_rc


def _bad_flag_body(rank):
    with commfuse.init() as comm:
        x, w = np.ones((2, 4), F32), np.ones((4, 4), F32)
        flag = np.array([1, 0]) if rank == 1 else True  # bool() of it raises ValueError
        try:
            commfuse.all_gather_base_mm(x, w, comm.name, 2, gather_output=flag)
            got = None
        except commfuse.Error as e:
            got = (type(e).__name__, e.message)
        except ValueError as e:
            got = ("ValueError", str(e))
        y, _ = commfuse.all_gather_base_mm(x, w, comm.name, 2, gather_output=False)
        return got, comm.usable, y.tolist()


def test_a_bad_flag_on_one_rank_fails_its_peers_at_once():
    # The per-call fast path judged gather_output with bool() outside Args: the ValueError
    # stayed on rank 1 and rank 0 waited for it until COMMFUSE_TIMEOUT_S. Then a bare
    # ValueError ("ambiguous") inside Args; now InvalidArgument (SPEC §0) naming the flag.
    (got0, usable0, y0), (got1, usable1, y1) = run(_bad_flag_body, 2)
    assert got1[0] == "InvalidArgument" and "gather_output must be a bool" in got1[1], got1
    assert got0[0] == "RuntimeFailure" and "rank 1 rejected the call" in got0[1], got0
    assert "gather_output must be a bool" in got0[1], got0
    assert usable0 and usable1 and y0 == y1 == [[4.0] * 4] * 4, (y0, y1)


class _StrRaises:
    def __str__(self):
        raise RuntimeError("no name for this reduce_op")


def _bad_reduce_op_body(rank):
    import time
    with commfuse.init() as comm:
        op = _StrRaises() if rank == 1 else "sum"
        x1, x2 = np.ones((4, 4), F32), np.ones((4, 4), F32)
        q, s = np.ones((4, 128), np.int8), np.full((4, 1), 0.5, F32)
        calls = {
            "mm_all_reduce_base":
                lambda o: commfuse.mm_all_reduce_base(x1, x2, comm.name, reduce_op=o),
            "mm_reduce_scatter_base":
                lambda o: commfuse.mm_reduce_scatter_base(x1, x2, comm.name, 2, reduce_op=o),
            "quant_all_reduce": lambda o: commfuse.quant_all_reduce(q, s, comm.name, reduce_op=o),
            "quant_reduce_scatter":
                lambda o: commfuse.quant_reduce_scatter(q, s, comm.name, reduce_op=o),
        }
        got = {}
        for name, call in calls.items():
            t0 = time.monotonic()
            try:
                call(op)
                kind = None
            except commfuse.Error as e:
                kind = (type(e).__name__, e.message)
            except RuntimeError as e:
                kind = ("RuntimeError", str(e))
            seconds = time.monotonic() - t0
            got[name] = (kind, seconds, comm.usable, np.asarray(call("sum")).tolist())
        return got


def test_a_reduce_op_whose_str_raises_fails_its_peers_at_once():
    # The ops made str(reduce_op) after Args: the exception stayed on rank 1, and rank 0
    # waited for it until COMMFUSE_TIMEOUT_S, which left its communicator unusable.
    got0, got1 = run(_bad_reduce_op_body, 2)
    want = {"mm_all_reduce_base": [[8.0] * 4] * 4, "mm_reduce_scatter_base": [[8.0] * 4] * 2,
            "quant_all_reduce": [[1.0] * 128] * 4, "quant_reduce_scatter": [[1.0] * 128] * 2}
    for name, value in want.items():
        (kind0, s0, usable0, y0), (kind1, _, usable1, y1) = got0[name], got1[name]
        assert kind1 == ("RuntimeError", "no name for this reduce_op"), (name, kind1)
        assert kind0[0] == "RuntimeFailure" and "rank 1 rejected the call" in kind0[1], \
            (name, kind0)
        assert s0 < 5.0, (name, s0)
        assert usable0 and usable1 and y0 == y1 == value, (name, y0, y1)


def _destroyed_hcom_body(rank):
    comm = commfuse.init()
    name = comm.name
    comm.destroy()
    try:
        commfuse.all_gather_base_mm(np.ones((2, 4), F32), np.ones((4, 4), F32), comm, 1)
    except commfuse.Error as e:
        return type(e).__name__, e.message, name
    return None, "", name


def test_a_destroyed_communicator_as_hcom_names_the_op_and_the_group():
    kind, message, name = run(_destroyed_hcom_body, 1)[0]
    assert kind == "InvalidArgument", (kind, message)
    assert message.startswith("all_gather_matmul: group '" + name + "'"), message
    assert "destroyed" in message, message


def test_mismatch_keeps_the_group_and_abort_ends_it():
    outcomes = run(_abort_body, 2)
    for rank, (mismatch, usable_after, usable, failure, aborted) in enumerate(outcomes):
        assert mismatch[:2] == ("RuntimeFailure", 361001), mismatch
        assert re.search(r"rank \d passed count \d, rank \d passed \d \(every rank must pass "
                         r"the same count\)", mismatch[2]), mismatch[2]
        assert usable_after
        # rank 1 aborted; rank 0's next call fails at once naming it, and is unusable too
        assert aborted[:2] == ("RuntimeFailure", 361001) and "rank 1" in aborted[2], aborted
        assert not usable and "rank 1 aborted the communicator: test" in failure, failure
