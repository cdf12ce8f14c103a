"""MatmulReduceScatter (SPEC §2): torch_npu's ``npu_mm_reduce_scatter_base``."""

from __future__ import annotations

from typing import Any, Optional

import numpy.typing as npt

from .. import _commfuse
from .._packed import PackedWeight, native_packed
from .._tensor import (Args, as_int, dim, fast_matmul_inputs, fast_output, group_name,
                       small_ints, stream_of, weight_in_place)
from ._quant_common import quant_matmul_args


def mm_reduce_scatter_base(input: Any, x2: Any, hcom: Any, world_size: int, *,
                           reduce_op: str = "sum", bias: Any = None, x1_scale: Any = None,
                           x2_scale: Any = None, comm_turn: int = 0,
                           output_dtype: Optional[npt.DTypeLike] = None,
                           x1_dtype: Optional[npt.DTypeLike] = None,
                           x2_dtype: Optional[npt.DTypeLike] = None, out: Any = None,
                           packed_x2: Optional[PackedWeight] = None) -> Any:
    """Multiply locally, sum the products over ranks, keep this rank's block of rows.

    Rank r gets rows [r·m/R, (r+1)·m/R) of ``Σ_s input_s @ x2_s``, plus ``bias`` added once
    (not R times); float32 accumulation and rank-order sum, one rounding. Every rank must
    pass the same bias, or none: a host bias is part of the call's signature, as a digest of
    its values, so ranks that differ (other values, or a bias on one rank and none on
    another) fail the call on every rank with RuntimeFailure naming the bias, and the
    communicator stays usable. (CUDA biases are compared as present or not only.)

    CUDA tensors run on their GPU, queued on torch's current stream (the rules: the
    ``commfuse`` package docstring).

    Args:
        input: this rank's x1, (m, k) with m a multiple of R; float16, bfloat16 or float32,
            or quantized (SPEC §6): int8, ``ml_dtypes.float8_e4m3fn`` / ``float8_e5m2``,
            HiFloat8 codes (``x1_dtype="hifloat8"``).
        x2: this rank's weight, (k, n) (or a transposed (n, k) view), input's dtype (FP8:
            either float8 format).
        hcom: the communicator's name or the Communicator.
        world_size: the group's size R (must match it).
        reduce_op: "sum" (the only defined value).
        bias: optional (n,), input's dtype or float32 (quantized input: float32, bfloat16 or
            float16); the same on every rank.
        x1_scale: quantized input only (SPEC §6), optional float32 (1,), or for A8W8 (m,) /
            (m, 1) per token over input's rows. Absent: 1.
        x2_scale: quantized input only, required float32 (1,) or (n,) (A8W8 also (1, n)). Each
            rank's partial ``f32(input @ x2) * (x1_scale[i] * x2_scale[j])`` is summed in
            float32 in rank order.
        output_dtype: bfloat16 (default), float16 or float32 for quantized input; input's dtype
            (the default) otherwise. Ignored when ``out`` is given.
        x1_dtype, x2_dtype: format of input / x2 when they hold raw uint8 codes ("hifloat8").
        comm_turn: 0 = automatic chunking, 1..64 = chunks.
        out: optional (m/R, n) buffer, written in place and returned.
        packed_x2: optional :class:`commfuse.PackedWeight` made from this very ``x2``.

    Returns:
        (m/R, n) array of the output dtype.

    Raises:
        InvalidArgument: wrong dtype or shape, m not a multiple of R, reduce_op, world_size.
        RuntimeFailure: a peer failed or timed out; or the ranks passed different biases
            (``rank 1 passed bias (a digest of its values) <digest or none>, rank 0 passed
            <...> (every rank must pass the same bias (a digest of its values))``), on
            every rank; the communicator stays usable.
    """
    group = hcom if type(hcom) is str else group_name(hcom, "mm_reduce_scatter_base")
    plain = x1_scale is None and x2_scale is None and output_dtype is None and \
        x1_dtype is None and x2_dtype is None and \
        (packed_x2 is None or type(packed_x2) is PackedWeight)
    refs = fast_matmul_inputs(input, x2, bias) if plain else None  # numpy arrays as they are
    # reduce_op as str() makes it only inside Args below: a __str__ that raises must reach
    # the peers as this rank's rejection, not leave them waiting.
    if refs is not None and input.ndim == 2 and small_ints(world_size, comm_turn) and \
            type(reduce_op) is str and \
            (group_size := _commfuse.group_info(group)[1]) > 0:  # else: unknown group
        o = fast_output(out, (input.shape[0] // group_size, x2.shape[1]), input)
        if o is not None:
            _commfuse.matmul_reduce_scatter(refs[0], refs[1], group, world_size, o[1],
                                            reduce_op, refs[2], comm_turn,
                                            packed_x2=native_packed(packed_x2))
            return o[0]
    with Args("mm_reduce_scatter_base", group) as a:
        world = as_int(world_size, "world_size", 32)
        turn = as_int(comm_turn, "comm_turn")
        x1r = a.input(input, "input", x1_dtype, contiguous=True)
        x2r = a.input(x2, "x2", x2_dtype, contiguous=not weight_in_place(x2))
        biasr = a.optional(bias, "bias", contiguous=True)
        s1r, s2r, out_name = quant_matmul_args(a, x1r, x1_scale, x2_scale, output_dtype)
        r = a.world_size if a.world_size > 0 else max(world, 1)
        output, outr = a.output(out, "out", (dim(x1r, 0) // r, dim(x2r, 1)), out_name,
                                like=input)
        packed = native_packed(packed_x2)
        op = str(reduce_op)
    _commfuse.matmul_reduce_scatter(x1r, x2r, group, world, outr, op, biasr, turn,
                                    s1r, s2r, stream_of(input), packed)
    return output
