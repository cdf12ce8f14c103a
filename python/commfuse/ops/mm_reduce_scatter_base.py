"""MatmulReduceScatter (SPEC §2): torch_npu's ``npu_mm_reduce_scatter_base``."""

from __future__ import annotations

from typing import Any

from .. import _commfuse
from .._tensor import Args, dim, fast_matmul_inputs, fast_output, group_name


def mm_reduce_scatter_base(input: Any, x2: Any, hcom: Any, world_size: int, *,
                           reduce_op: str = "sum", bias: Any = None, comm_turn: int = 0,
                           out: Any = None) -> Any:
    """Multiply locally, sum the products over ranks, keep this rank's block of rows.

    Rank r gets rows [r·m/R, (r+1)·m/R) of ``Σ_s input_s @ x2_s``, plus ``bias`` added once
    (not R times); float32 accumulation and rank-order sum, one rounding.

    Args:
        input: this rank's x1, (m, k) with m a multiple of R; float16, bfloat16 or float32.
        x2: this rank's weight, (k, n) (or a transposed (n, k) view), input's dtype.
        hcom: the communicator's name or the Communicator.
        world_size: the group's size R (must match it).
        reduce_op: "sum" (the only defined value).
        bias: optional (n,), input's dtype or float32.
        comm_turn: 0 = automatic chunking, 1..64 = chunks.
        out: optional (m/R, n) buffer, written in place and returned.

    Returns:
        (m/R, n) array of input's dtype.

    Raises:
        InvalidArgument: wrong dtype or shape, m not a multiple of R, reduce_op, world_size.
        RuntimeFailure: a peer failed or timed out.
    """
    group = hcom if type(hcom) is str else group_name(hcom)
    refs = fast_matmul_inputs(input, x2, bias)  # numpy arrays used as they are
    if refs is not None and input.ndim == 2 and type(world_size) is int and \
            (group_size := _commfuse.group_info(group)[1]) > 0:  # else: unknown group
        o = fast_output(out, (input.shape[0] // group_size, x2.shape[1]), input)
        if o is not None:
            _commfuse.matmul_reduce_scatter(refs[0], refs[1], group, world_size, o[1],
                                            str(reduce_op), refs[2], int(comm_turn))
            return o[0]
    with Args("mm_reduce_scatter_base", group) as a:
        x1r = a.input(input, "input", contiguous=True)
        x2r = a.input(x2, "x2")
        biasr = a.optional(bias, "bias", contiguous=True)
        r = a.world_size if a.world_size > 0 else max(int(world_size), 1)
        output, outr = a.output(out, "out", (dim(x1r, 0) // r, dim(x2r, 1)), x1r.dtype,
                                like=input)
    _commfuse.matmul_reduce_scatter(x1r, x2r, group, int(world_size), outr, str(reduce_op),
                                    biasr, int(comm_turn))
    return output
