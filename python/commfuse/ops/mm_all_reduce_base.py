"""MatmulAllReduce (SPEC §2): torch_npu's ``npu_mm_all_reduce_base``."""

from __future__ import annotations

from typing import Any, Optional

import numpy.typing as npt

from .. import _commfuse
from .._packed import PackedWeight, native_packed
from .._tensor import (Args, as_int, dim, fast_matmul_inputs, fast_output, group_name,
                       small_ints, stream_of, weight_in_place)
from ._quant_common import quant_matmul_args


def mm_all_reduce_base(x1: Any, x2: Any, hcom: Any, *, reduce_op: str = "sum", bias: Any = None,
                       x1_scale: Any = None, x2_scale: Any = None, comm_turn: int = 0,
                       output_dtype: Optional[npt.DTypeLike] = None,
                       x1_dtype: Optional[npt.DTypeLike] = None,
                       x2_dtype: Optional[npt.DTypeLike] = None, out: Any = None,
                       packed_x2: Optional[PackedWeight] = None) -> Any:
    """Multiply locally and sum the products over ranks: ``Σ_s x1_s @ x2_s + bias``.

    float32 accumulation, rank-order sum, bias added once, one rounding: every rank gets
    the same bits. Every rank must pass the same bias, or none: a host bias is part of the
    call's signature, as a digest of its values, so ranks that differ (other values, or a
    bias on one rank and none on another) fail the call on every rank with RuntimeFailure
    naming the bias, and the communicator stays usable. (CUDA biases are compared as
    present or not only.)

    CUDA tensors run on their GPU, queued on torch's current stream (the rules: the
    ``commfuse`` package docstring).

    Args:
        x1: this rank's (m, k) or (b, s, k) activations; float16, bfloat16 or float32, or
            quantized (SPEC §6): int8, ``ml_dtypes.float8_e4m3fn`` / ``float8_e5m2``,
            HiFloat8 codes (``x1_dtype="hifloat8"``).
        x2: this rank's weight, (k, n) (or a transposed (n, k) view), x1's dtype (FP8:
            either float8 format).
        hcom: the communicator's name or the Communicator.
        reduce_op: "sum" (the only defined value).
        bias: optional (n,), x1's dtype or float32 (quantized x1: float32, bfloat16 or
            float16); the same on every rank.
        x1_scale: quantized x1 only (SPEC §6), optional float32 (1,), or for A8W8 (m,) /
            (m, 1) per token over x1's rows. Absent: 1.
        x2_scale: quantized x1 only, required float32 (1,) or (n,) (A8W8 also (1, n)). Each
            rank's partial ``f32(x1 @ x2) * (x1_scale[i] * x2_scale[j])`` is summed in
            float32 in rank order.
        output_dtype: bfloat16 (default), float16 or float32 for quantized x1; x1's dtype
            (the default) otherwise. Ignored when ``out`` is given.
        x1_dtype, x2_dtype: format of x1 / x2 when they hold raw uint8 codes ("hifloat8").
        comm_turn: 0 = automatic chunking, 1..64 = chunks.
        out: optional buffer of x1's leading dims × n, written in place and returned.
        packed_x2: optional :class:`commfuse.PackedWeight` made from this very ``x2``.

    Returns:
        array of shape x1.shape[:-1] + (n,) in the output dtype.

    Raises:
        InvalidArgument: wrong dtype or shape, reduce_op.
        RuntimeFailure: a peer failed or timed out; or the ranks passed different biases
            (``rank 1 passed bias (a digest of its values) <digest or none>, rank 0 passed
            <...> (every rank must pass the same bias (a digest of its values))``), on
            every rank; the communicator stays usable.
    """
    group = hcom if type(hcom) is str else group_name(hcom, "mm_all_reduce_base")
    plain = x1_scale is None and x2_scale is None and output_dtype is None and \
        x1_dtype is None and x2_dtype is None and \
        (packed_x2 is None or type(packed_x2) is PackedWeight)
    refs = fast_matmul_inputs(x1, x2, bias) if plain else None  # numpy arrays as they are
    # reduce_op as str() makes it only inside Args below: a __str__ that raises must reach
    # the peers as this rank's rejection, not leave them waiting.
    if refs is not None and x1.ndim >= 1 and small_ints(comm_turn) and type(reduce_op) is str:
        o = fast_output(out, x1.shape[:-1] + (x2.shape[1],), x1)
        if o is not None:
            _commfuse.matmul_all_reduce(refs[0], refs[1], group, o[1], reduce_op, refs[2],
                                        comm_turn, packed_x2=native_packed(packed_x2))
            return o[0]
    with Args("mm_all_reduce_base", group) as a:
        turn = as_int(comm_turn, "comm_turn")
        x1r = a.input(x1, "x1", x1_dtype, contiguous=True)
        x2r = a.input(x2, "x2", x2_dtype, contiguous=not weight_in_place(x2))
        biasr = a.optional(bias, "bias", contiguous=True)
        s1r, s2r, out_name = quant_matmul_args(a, x1r, x1_scale, x2_scale, output_dtype)
        shape = tuple(x1r.shape[:-1]) + (dim(x2r, 1),) if x1r.shape else (dim(x2r, 1),)
        output, outr = a.output(out, "out", shape, out_name, like=x1)
        packed = native_packed(packed_x2)
        op = str(reduce_op)
    _commfuse.matmul_all_reduce(x1r, x2r, group, outr, op, biasr, turn, s1r, s2r,
                                stream_of(x1), packed)
    return output
