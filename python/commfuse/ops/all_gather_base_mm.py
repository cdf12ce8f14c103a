"""AllGatherMatmul (SPEC §2): torch_npu's ``npu_all_gather_base_mm``."""

from __future__ import annotations

from typing import Any, Optional

import numpy.typing as npt

from .. import _commfuse
from .._packed import PackedWeight, native_packed
from .._tensor import (Args, as_bool, as_int, dim, fast_matmul_inputs, fast_output, group_name,
                       small_ints, stream_of, weight_in_place)
from ._quant_common import quant_matmul_args


def all_gather_base_mm(input: Any, x2: Any, hcom: Any, world_size: int, *, bias: Any = None,
                       x1_scale: Any = None, x2_scale: Any = None, gather_index: int = 0,
                       gather_output: bool = True, comm_turn: int = 0,
                       output_dtype: Optional[npt.DTypeLike] = None,
                       x1_dtype: Optional[npt.DTypeLike] = None,
                       x2_dtype: Optional[npt.DTypeLike] = None, out: Any = None,
                       gather_out: Any = None,
                       packed_x2: Optional[PackedWeight] = None) -> tuple[Any, Any]:
    """All-gather the row blocks of ``input`` over the group, then multiply by ``x2``.

    ``gather_out = concat_s(input_s)`` (rank order) and ``output = gather_out @ x2 + bias``,
    accumulated in float32 and rounded once to input's dtype.

    CUDA tensors run on their GPU, queued on torch's current stream (the rules: the
    ``commfuse`` package docstring).

    Args:
        input: this rank's x1 block, (m, k), float16, bfloat16 or float32; or quantized
            (SPEC §6): int8 (A8W8), ``ml_dtypes.float8_e4m3fn`` / ``float8_e5m2`` (FP8), or
            HiFloat8 as uint8 codes with ``x1_dtype="hifloat8"``. Not copied when row-major
            contiguous (otherwise a numpy array is copied first).
        x2: this rank's weight, (k, n), input's dtype (FP8: either float8 format); a
            transposed view of an (n, k) array (``w.T``) is used in place.
        hcom: the communicator's name (``comm.name``) or the Communicator.
        world_size: the group's size R (must match it).
        bias: optional (n,), input's dtype or float32; added once per output row. Quantized
            input: float32, bfloat16 or float16, or int32 for A8W8 (added to the int32 sum).
        x1_scale: quantized input only, optional float32 (1,), or for A8W8 (m,) / (m, 1) per
            token; travels with its rows. Absent: 1.
        x2_scale: quantized input only, required float32 (1,) or (n,) (A8W8 also (1, n)).
            ``output = f32(gather_out @ x2) * (x1_scale[i] * x2_scale[j]) + bias``.
        gather_index: 0 (gather input); 1 is not supported.
        gather_output: False returns an empty (0,) array as gather_out.
        comm_turn: 0 = automatic chunking, 1..64 = chunks per rank block.
        output_dtype: the output's dtype: bfloat16 (default), float16 or float32 for
            quantized input; input's dtype (the default) otherwise. Ignored when ``out`` is
            given.
        x1_dtype, x2_dtype: format of input / x2 when they hold raw uint8 codes
            ("hifloat8").
        out: optional (m·R, n) buffer for output, written in place and returned.
        gather_out: optional (m·R, k) buffer for gather_out, written in place and returned.
        packed_x2: optional :class:`commfuse.PackedWeight` made from this very ``x2``: its
            GEMMs read the packed form instead of packing x2 on every call.

    Returns:
        ``(output, gather_out)``: new numpy arrays (torch tensors when input is one) unless
        given as ``out`` / ``gather_out``.

    Raises:
        InvalidArgument: wrong dtype, shape, world_size, gather_index, comm_turn or group
            (on this rank; its peers fail with RuntimeFailure naming this rank).
        RuntimeFailure: a peer failed or timed out.
    """
    group = hcom if type(hcom) is str else group_name(hcom, "all_gather_base_mm")
    plain = x1_scale is None and x2_scale is None and output_dtype is None and \
        x1_dtype is None and x2_dtype is None and \
        (packed_x2 is None or type(packed_x2) is PackedWeight)
    refs = fast_matmul_inputs(input, x2, bias) if plain else None
    # Flags too are plain here: any other value is judged inside Args, where an exception
    # (bool() of an array) is told to the peers instead of leaving them waiting.
    # An unknown group (group_info's size 0) takes the general path too.
    if refs is not None and input.ndim == 2 and small_ints(world_size, gather_index, comm_turn) \
            and type(gather_output) is bool \
            and (group_size := _commfuse.group_info(group)[1]) > 0:
        rows = input.shape[0] * group_size
        o = fast_output(out, (rows, x2.shape[1]), input)
        g = fast_output(gather_out, (rows, input.shape[1]) if gather_output else (0,), input)
        if o is not None and g is not None:
            _commfuse.all_gather_matmul(refs[0], refs[1], group, world_size, o[1], g[1], refs[2],
                                        gather_index, bool(gather_output), comm_turn,
                                        packed_x2=native_packed(packed_x2))
            return o[0], g[0]
    with Args("all_gather_base_mm", group) as a:
        world = as_int(world_size, "world_size", 32)
        index, turn = as_int(gather_index, "gather_index"), as_int(comm_turn, "comm_turn")
        gather = as_bool(gather_output, "gather_output")
        x1r = a.input(input, "input", x1_dtype, contiguous=True)
        x2r = a.input(x2, "x2", x2_dtype, contiguous=not weight_in_place(x2))
        biasr = a.optional(bias, "bias", contiguous=True)
        s1r, s2r, out_name = quant_matmul_args(a, x1r, x1_scale, x2_scale, output_dtype)
        rows = dim(x1r, 0) * (a.world_size if a.world_size > 0 else max(world, 1))
        output, outr = a.output(out, "out", (rows, dim(x2r, 1)), out_name, like=input)
        shape = (rows, dim(x1r, 1)) if gather else (0,)
        gathered, gatherr = a.output(gather_out, "gather_out", shape, x1r.dtype, like=input)
        packed = native_packed(packed_x2)
    _commfuse.all_gather_matmul(x1r, x2r, group, world, outr, gatherr, biasr, index,
                                gather, turn, s1r, s2r, stream_of(input), packed)
    return output, gathered
