"""MatmulAllReduce (SPEC §2): torch_npu's ``npu_mm_all_reduce_base``."""

from __future__ import annotations

from typing import Any

from .. import _commfuse
from .._tensor import Args, dim, fast_matmul_inputs, fast_output, group_name


def mm_all_reduce_base(x1: Any, x2: Any, hcom: Any, *, reduce_op: str = "sum", bias: Any = None,
                       comm_turn: int = 0, out: Any = None) -> Any:
    """Multiply locally and sum the products over ranks: ``Σ_s x1_s @ x2_s + bias``.

    float32 accumulation, rank-order sum, bias added once, one rounding: every rank gets
    the same bits (when every rank passes the same bias).

    Args:
        x1: this rank's (m, k) or (b, s, k) activations; float16, bfloat16 or float32.
        x2: this rank's weight, (k, n) (or a transposed (n, k) view), x1's dtype.
        hcom: the communicator's name or the Communicator.
        reduce_op: "sum" (the only defined value).
        bias: optional (n,), x1's dtype or float32.
        comm_turn: 0 = automatic chunking, 1..64 = chunks.
        out: optional buffer of x1's leading dims × n, written in place and returned.

    Returns:
        array of shape x1.shape[:-1] + (n,) and x1's dtype.

    Raises:
        InvalidArgument: wrong dtype or shape, reduce_op.
        RuntimeFailure: a peer failed or timed out.
    """
    group = hcom if type(hcom) is str else group_name(hcom)
    refs = fast_matmul_inputs(x1, x2, bias)  # numpy arrays used as they are
    if refs is not None and x1.ndim >= 1:
        o = fast_output(out, x1.shape[:-1] + (x2.shape[1],), x1)
        if o is not None:
            _commfuse.matmul_all_reduce(refs[0], refs[1], group, o[1], str(reduce_op), refs[2],
                                        int(comm_turn))
            return o[0]
    with Args("mm_all_reduce_base", group) as a:
        x1r = a.input(x1, "x1", contiguous=True)
        x2r = a.input(x2, "x2")
        biasr = a.optional(bias, "bias", contiguous=True)
        shape = tuple(x1r.shape[:-1]) + (dim(x2r, 1),) if x1r.shape else (dim(x2r, 1),)
        output, outr = a.output(out, "out", shape, x1r.dtype, like=x1)
    _commfuse.matmul_all_reduce(x1r, x2r, group, outr, str(reduce_op), biasr, int(comm_turn))
    return output
