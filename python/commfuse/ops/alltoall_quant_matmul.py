"""AlltoAllQuantMatmul (SPEC §3): CANN's ``aclnnAlltoAllQuantMatmul``."""

from __future__ import annotations

from typing import Any, Optional

import numpy.typing as npt

from .. import _commfuse
from .._packed import PackedWeight, native_packed
from .._tensor import Args, as_bool, as_int, dim, group_name, stream_of
from ._quant_common import check_world_size, dtype_arg, maybe_int4_input, unpack


def alltoall_quant_matmul(x1: Any, x2: Any, x2_scale: Any, hcom: Any, world_size: int, *,
                          bias: Any = None, x1_scale: Any = None, x1_quant_mode: int = 7,
                          x2_quant_mode: int = 2, transpose_x2: bool = False,
                          return_alltoall_out: bool = False,
                          output_dtype: Optional[npt.DTypeLike] = None,
                          x1_dtype: Optional[npt.DTypeLike] = None,
                          x2_dtype: Optional[npt.DTypeLike] = None, out: Any = None,
                          alltoall_out: Any = None,
                          packed_x2: Optional[PackedWeight] = None) -> tuple[Any, Any]:
    """All-to-all the token rows of ``x1``, quantize them per token, multiply by ``x2``.

    On rank r, ``permuted[i, s*H:(s+1)*H] = x1 of rank s, row r*BS/R + i`` (shape
    (BS/R, R*H)); each permuted row is quantized (dynamic per-token, or A4W4's static
    per-token scales that travel with their rows), multiplied by the integer weights with
    int32 accumulation, then ``y = acc * x2_scale[n] * s_i + bias[n]`` in float32, rounded
    once to the output dtype (SPEC §3).

    Supported combinations (anything else raises InvalidArgument naming it):

    - A16W8: x1 float16/bfloat16, x2 int8, x1_quant_mode 7, x2_quant_mode 2.
    - A16W4: x1 float16/bfloat16, x2 int4, x1_quant_mode 7, x2_quant_mode 2 (activations
      quantized to [-7, 7]).
    - A4W4: x1 int4, x2 int4, x1_quant_mode 3 (x1_scale required), x2_quant_mode 2.


    CUDA tensors run on their GPU, queued on torch's current stream (the rules: the
    ``commfuse`` package docstring).

    Args:
        x1: this rank's (BS, H) activations; BS a multiple of R. float16 / bfloat16, or int4
            (A4W4): an ``ml_dtypes.int4`` array (packed by the library: a copy), or packed
            uint8 bytes (BS, H/2) with ``x1_dtype="int4"``.
        x2: this rank's weight, (R*H, N), or (N, R*H) with ``transpose_x2=True`` (as CANN);
            either form may also be a transposed view (``w.T`` of a dense (N, R*H) ``w``:
            the same call as ``w`` with ``transpose_x2=True``, int8 read in place). int8, or int4
            (``ml_dtypes.int4``, packed by the library; or packed uint8 bytes with
            ``x2_dtype="int4"``, packed along the last dim, which must be dense).
        x2_scale: float32 (N,), per output channel.
        hcom: the communicator's name (``comm.name``) or the Communicator.
        world_size: the group's size R (must match it).
        bias: optional (N,): x1's dtype or float32 (A4W4: float16, bfloat16 or float32).
        x1_scale: A16W8 / A16W4: optional smooth scale (R*H,) in x1's dtype, multiplied
            into each permuted row before quantization. A4W4: required float32 (BS,), the
            per-token scale of each local row.
        x1_quant_mode: 7 (dynamic per token) for A16, 3 (static per token) for A4W4.
        x2_quant_mode: 2 (per channel).
        transpose_x2: x2 is given (N, R*H) (CANN's transposeX2).
        return_alltoall_out: also return ``permuted`` (before quantization).
        output_dtype: dtype of a new output: x1's dtype by default (A4W4: bfloat16 unless
            given as float16). Ignored when ``out`` is given.
        x1_dtype, x2_dtype: format of x1 / x2 when they hold raw codes ("int4" packed).
        out: optional (BS/R, N) buffer for the output, written in place and returned.
        alltoall_out: optional (BS/R, R*H) buffer in x1's dtype (packed uint8 for int4);
            implies ``return_alltoall_out``.
        packed_x2: A16W8 and A16W4: an optional :class:`commfuse.PackedWeight` made from
            this very ``x2`` as the (R*H, N) matrix: an int8 ``x2`` itself, or ``x2.T`` with
            ``transpose_x2=True``; an int4 ``x2`` as the packed bytes passed here with
            ``x2_dtype="int4"`` (``PackedWeight(x2, rows, x2_dtype="int4",
            transpose_x2=...)``). The GEMM then reads x2 as prepared there instead of
            preparing it on every call. A4W4: not supported.

    Returns:
        ``(output, alltoall_out)``: alltoall_out is None unless asked for. For an
        ``ml_dtypes.int4`` x1 a new alltoall_out is an ``ml_dtypes.int4`` array.

    Raises:
        InvalidArgument: unsupported combination, wrong dtype or shape, BS % R != 0,
            reserved values, world_size mismatch, unknown group (on this rank; its peers
            fail with RuntimeFailure naming this rank).
        NullPointerError: A4W4 without x1_scale.
        RuntimeFailure: a peer failed or timed out.

    Checks made by the library name the arguments as the C prototype does (SPEC §3, names
    kept): ``x2Scale`` is x2_scale, ``x1ScaleOptional`` x1_scale, ``alltoAllOutOptional``
    alltoall_out.
    """
    group = group_name(hcom, "alltoall_quant_matmul")
    with Args("alltoall_quant_matmul", group) as a:
        r = check_world_size(a, world_size)
        x1r, x1_unpacked = maybe_int4_input(a, x1, "x1", x1_dtype)
        x2r, _ = maybe_int4_input(a, x2, "x2", x2_dtype)
        scaler = a.input(x2_scale, "x2_scale", contiguous=True)
        biasr = a.optional(bias, "bias", contiguous=True)
        x1sr = a.optional(x1_scale, "x1_scale", contiguous=True)
        transpose = as_bool(transpose_x2, "transpose_x2")
        n = dim(x2r, 0) if transpose else dim(x2r, 1)
        rows = dim(x1r, 0) // r
        if output_dtype is not None:
            out_name = dtype_arg(output_dtype, "output_dtype")
        else:
            out_name = "bfloat16" if x1r.dtype == "int4" else x1r.dtype
        like = None if x1_unpacked else x1
        output, outr = a.output(out, "out", (rows, n), out_name, like=like)
        a2a = a2ar = None
        if as_bool(return_alltoall_out, "return_alltoall_out") or alltoall_out is not None:
            k = r * dim(x1r, 1)
            shape = (rows, k // 2) if x1r.dtype == "int4" else (rows, k)
            a2a, a2ar = a.output(alltoall_out, "alltoall_out", shape, x1r.dtype, like=like)
        packed = native_packed(packed_x2)  # a wrong type: rejected for the group, as above
        modes = as_int(x1_quant_mode, "x1_quant_mode"), as_int(x2_quant_mode, "x2_quant_mode")
    _commfuse.alltoall_quant_matmul(x1r, x2r, scaler, group, outr, a2ar, biasr, x1sr, *modes,
                                    transpose, stream_of(x1), packed)
    if a2a is not None and alltoall_out is None and x1_unpacked:
        a2a = unpack(a2a)
    return output, a2a
