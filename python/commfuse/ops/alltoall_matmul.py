"""AlltoAllMatmul (SPEC §3): the unquantized sibling of ``aclnnAlltoAllQuantMatmul``."""

from __future__ import annotations

from typing import Any, Optional

from .. import _commfuse
from .._packed import PackedWeight, native_packed
from .._tensor import Args, as_bool, dense_or_transposed, dim, group_name, stream_of
from ._quant_common import check_world_size


def alltoall_matmul(x1: Any, x2: Any, hcom: Any, world_size: int, *, bias: Any = None,
                    transpose_x2: bool = False, return_alltoall_out: bool = False,
                    out: Any = None, alltoall_out: Any = None,
                    packed_x2: Optional[PackedWeight] = None) -> tuple[Any, Any]:
    """All-to-all the token rows of ``x1``, then multiply by ``x2``.

    On rank r, ``permuted[i, s*H:(s+1)*H] = x1 of rank s, row r*BS/R + i`` (shape
    (BS/R, R*H)) and ``output = permuted @ x2 + bias``, float32 accumulation, one rounding.


    CUDA tensors run on their GPU, queued on torch's current stream (the rules: the
    ``commfuse`` package docstring).

    Args:
        x1: this rank's (BS, H) activations, float16, bfloat16 or float32; BS % R == 0.
        x2: this rank's weight (R*H, N) in x1's dtype, or (N, R*H) with ``transpose_x2``
            (as CANN); either form may also be a transposed view (``w.T`` of a dense
            (N, R*H) ``w`` is read in place, the same call as ``w`` with
            ``transpose_x2=True``).
        hcom: the communicator's name or the Communicator.
        world_size: the group's size R (must match it).
        bias: optional (N,), x1's dtype or float32.
        transpose_x2: x2 is given (N, R*H) (CANN's transposeX2).
        return_alltoall_out: also return ``permuted``.
        out: optional (BS/R, N) buffer for the output, written in place and returned.
        alltoall_out: optional (BS/R, R*H) buffer for ``permuted``; implies
            ``return_alltoall_out``.
        packed_x2: an optional :class:`commfuse.PackedWeight` made from this very ``x2``
            as the (R*H, N) matrix (``x2``, or ``x2.T`` with ``transpose_x2=True``) for
            ``rows`` = BS/R.

    Returns:
        ``(output, alltoall_out)``; alltoall_out is None unless asked for.

    Raises:
        InvalidArgument: wrong dtype or shape, BS % R != 0, world_size mismatch, unknown
            group.
        RuntimeFailure: a peer failed or timed out.

    Checks made by the library name the arguments as the C prototype does (SPEC §3, names
    kept): ``alltoAllOutOptional`` is alltoall_out.
    """
    group = group_name(hcom, "alltoall_matmul")
    with Args("alltoall_matmul", group) as a:
        r = check_world_size(a, world_size)
        x1r = a.input(x1, "x1", contiguous=True)
        x2r = a.input(x2, "x2", contiguous=not dense_or_transposed(x2))
        biasr = a.optional(bias, "bias", contiguous=True)
        transpose = as_bool(transpose_x2, "transpose_x2")
        n = dim(x2r, 0) if transpose else dim(x2r, 1)
        rows = dim(x1r, 0) // r
        output, outr = a.output(out, "out", (rows, n), x1r.dtype, like=x1)
        a2a = a2ar = None
        if as_bool(return_alltoall_out, "return_alltoall_out") or alltoall_out is not None:
            a2a, a2ar = a.output(alltoall_out, "alltoall_out", (rows, r * dim(x1r, 1)),
                                 x1r.dtype, like=x1)
        packed = native_packed(packed_x2)  # a wrong type: rejected for the group
    _commfuse.alltoall_matmul(x1r, x2r, group, outr, a2ar, biasr, transpose,
                              stream_of(x1), packed)
    return output, a2a
