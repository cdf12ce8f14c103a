"""QuantAllReduce (SPEC §4): CANN's ``aclnnQuantAllReduce``."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from .. import _commfuse
from .._tensor import Args, group_name, stream_of
from ._quant_common import dtype_arg


def quant_all_reduce(x: Any, scales: Any, hcom: Any, *, reduce_op: str = "sum",
                     output_dtype: npt.DTypeLike = np.float32,
                     dtype: Optional[npt.DTypeLike] = None, out: Any = None) -> Any:
    """Sum quantized tensors over ranks: ``Σ_r dequant(x_r, scales_r)``.

    Each element is multiplied by its group's scale in float32; the sum is float32 in rank
    order 0..R-1, rounded once to ``output_dtype``: every rank gets the same bits.

    CUDA tensors run on their GPU, queued on torch's current stream (the rules: the
    ``commfuse`` package docstring).

    Args:
        x: this rank's (bs, H) or (b, s, H) codes: int8, ``ml_dtypes.float8_e4m3fn``,
            ``ml_dtypes.float8_e5m2``, or HiFloat8 as uint8 codes with ``dtype="hifloat8"``.
        scales: K-G mode: float32 (bs, H/128) / (b, s, H/128), one per 128 elements.
            MX mode (float8 x only): ``ml_dtypes.float8_e8m0fnu`` (bs, H/64, 2) /
            (b, s, H/64, 2), one per 32 elements (see :func:`quantize`).
        hcom: the communicator's name or the Communicator.
        reduce_op: "sum" (the only defined value).
        output_dtype: float32, float16 or bfloat16 (a numpy / ml_dtypes dtype or a name).
            Ignored when ``out`` is given.
        dtype: format of x when it holds raw codes ("hifloat8").
        out: optional buffer of x's shape (float32 / float16 / bfloat16), written in place
            and returned.

    Returns:
        array of x's shape in ``output_dtype`` (a torch tensor when x is one).

    Raises:
        InvalidArgument: wrong dtype or shape, H not a multiple of 128 (K-G) / 64 (MX),
            reduce_op, unknown group (on this rank; its peers fail with RuntimeFailure).
        RuntimeFailure: a peer failed or timed out.
    """
    group = group_name(hcom, "quant_all_reduce")
    with Args("quant_all_reduce", group) as a:
        xr = a.input(x, "x", dtype, contiguous=True)
        sr = a.input(scales, "scales", contiguous=True)
        name = dtype_arg(output_dtype, "output_dtype")
        output, outr = a.output(out, "out", tuple(xr.shape), name, like=x)
        op = str(reduce_op)  # in Args: a __str__ that raises is this rank's rejection
    _commfuse.quant_all_reduce(xr, sr, group, outr, op, stream_of(x))
    return output
