"""QuantReduceScatter (SPEC §4): CANN's ``aclnnQuantReduceScatter``."""

from __future__ import annotations

from math import prod
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from .. import _commfuse
from .._tensor import Args, group_name, stream_of
from ._quant_common import dtype_arg


def quant_reduce_scatter(x: Any, scales: Any, hcom: Any, *, reduce_op: str = "sum",
                         output_dtype: npt.DTypeLike = np.float32,
                         dtype: Optional[npt.DTypeLike] = None, out: Any = None) -> Any:
    """Sum quantized tensors over ranks and keep this rank's row block.

    The sum is that of :func:`quant_all_reduce`; with BS = bs (or b·s) rows, rank r gets
    rows [r·BS/R, (r+1)·BS/R), shape (BS/R, H).

    CUDA tensors run on their GPU, queued on torch's current stream (the rules: the
    ``commfuse`` package docstring).

    Args:
        x: this rank's (bs, H) or (b, s, H) codes: int8, float8_e4m3fn, float8_e5m2, or
            HiFloat8 uint8 codes with ``dtype="hifloat8"``. BS must be a multiple of R.
        scales: float32 (…, H/128) (K-G) or float8_e8m0 (…, H/64, 2) (MX, float8 x only).
        hcom: the communicator's name or the Communicator.
        reduce_op: "sum" (the only defined value).
        output_dtype: float32, float16 or bfloat16. Ignored when ``out`` is given.
        dtype: format of x when it holds raw codes ("hifloat8").
        out: optional (BS/R, H) buffer, written in place and returned.

    Returns:
        (BS/R, H) array in ``output_dtype``.

    Raises:
        InvalidArgument: wrong dtype or shape, BS % R != 0, reduce_op, unknown group.
        RuntimeFailure: a peer failed or timed out.
    """
    group = group_name(hcom, "quant_reduce_scatter")
    with Args("quant_reduce_scatter", group) as a:
        xr = a.input(x, "x", dtype, contiguous=True)
        sr = a.input(scales, "scales", contiguous=True)
        name = dtype_arg(output_dtype, "output_dtype")
        shape = tuple(xr.shape)
        r = max(a.world_size, 1)
        bs = prod(shape[:-1]) if len(shape) >= 2 else 0
        h = shape[-1] if shape else 0
        output, outr = a.output(out, "out", (bs // r, h), name, like=x)
        op = str(reduce_op)  # in Args: a __str__ that raises is this rank's rejection
    _commfuse.quant_reduce_scatter(xr, sr, group, outr, op, stream_of(x))
    return output
