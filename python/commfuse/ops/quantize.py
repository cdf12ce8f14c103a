"""Quantize helpers (SPEC §5): the formats the quantized operators take. Not collective."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from .. import _commfuse
from .._tensor import Args, as_int
from ._quant_common import dtype_arg

def _scales_shape(lead: tuple[int, ...], h: int, mode: str) -> tuple[tuple[int, ...], str]:
    """(shape, dtype name) of the scales of a (*lead, h) tensor in ``mode``. Unknown modes
    get a placeholder: libcommfuse rejects the mode before looking at it."""
    if mode == "mx":  # ceil: an H that is not a multiple is reported by libcommfuse
        return lead + (-(-h // 64), 2), "float8_e8m0"
    if mode == "per_token_group":
        return lead + (-(-h // 128),), "float32"
    return lead, "float32"


def quantize(x: Any, dtype: npt.DTypeLike, mode: str,
             group_size: Optional[int] = None) -> tuple[Any, Any]:
    """Quantize ``x`` into codes and scales in the layouts the quantized ops take (SPEC §5).

    - ``mode="per_token_group"``: groups of 128 along the last dim; ``scale = amax / qmax``
      in float32 (qmax: int8 127, float8_e4m3fn 448, float8_e5m2 57344, hifloat8 15);
      codes ``convert(x / scale)``, saturating; an all-zero group gets scale 1.
    - ``mode="mx"``: groups of 32; E8M0 scale ``2^e`` with ``e = floor(log2(amax)) - emax``
      (emax: e4m3 8, e5m2 15), codes ``convert(x / 2^e)``; scales in the (…, H/64, 2)
      layout.
    - ``mode="per_token"``: int8 or int4 codes, one float32 scale per row
      (``scale = amax / Q``, Q = 127 / 7, round-half-even, clamped to [-Q, Q]; SPEC §3's
      quantizer, the one alltoall_quant_matmul applies); a zero row gets scale 0. int4
      codes come back packed two per byte (uint8, last dim H/2).

    Args:
        x: float32, float16 or bfloat16 array, (…, H).
        dtype: format of the codes: ``numpy.int8``, ``ml_dtypes.float8_e4m3fn``,
            ``ml_dtypes.float8_e5m2`` (or their names), ``"hifloat8"``, or ``"int4"``
            (per_token).
        mode: "per_token_group", "mx" or "per_token".
        group_size: None (or the mode's own: 128 / 32).

    Returns:
        ``(q, scales)``: q of x's shape (HiFloat8: uint8 codes; int4: packed uint8
        (…, H/2)); scales float32 (…, H/128), ``ml_dtypes.float8_e8m0fnu`` (…, H/64, 2),
        or per_token float32 of x's leading dims.

    Raises:
        InvalidArgument: unknown or unsupported mode / dtype, H not a multiple of the
            group, another group_size.
    """
    with Args("quantize", None) as a:
        xr = a.input(x, "x", contiguous=True)
        name = dtype_arg(dtype, "dtype")
        shape = tuple(xr.shape)
        lead, h = (shape[:-1], shape[-1]) if shape else ((), 0)
        qshape = lead + ((h + 1) // 2,) if name == "int4" else shape  # int4: packed bytes
        q, qr = a.output(None, "q", qshape, name, like=x)
        sshape, sname = _scales_shape(lead, h, str(mode))
        scales, sr = a.output(None, "scales", sshape, sname, like=x)
        group = 0 if group_size is None else as_int(group_size, "group_size")
    _commfuse.quantize(xr, str(mode), qr, sr, group)
    return q, scales


def dequantize(q: Any, scales: Any, mode: str, output_dtype: npt.DTypeLike = np.float32,
               group_size: Optional[int] = None, *, dtype: Optional[npt.DTypeLike] = None,
               out: Any = None) -> Any:
    """``q · scale`` in float32, rounded once to ``output_dtype``: the map the quantized ops
    apply to each rank's block (SPEC §4, §5); the inverse of :func:`quantize`.

    Args:
        q: codes, (…, H): int8, float8_e4m3fn, float8_e5m2, or HiFloat8 uint8 codes with
            ``dtype="hifloat8"``; per_token: int8, or int4 as the packed uint8 bytes
            (…, H/2) :func:`quantize` returns, with ``dtype="int4"``.
        scales: as :func:`quantize` returns them for ``mode`` (per_token: float32, one
            per row, q's leading dims).
        mode: "per_token_group", "mx" or "per_token".
        output_dtype: float32, float16 or bfloat16. Ignored when ``out`` is given.
        group_size: None (or the mode's own; per_token: None or 0).
        dtype: format of q when it holds raw codes ("hifloat8", "int4").
        out: optional buffer of q's shape, written in place and returned.

    Returns:
        array of q's shape in ``output_dtype``.

    Raises:
        InvalidArgument: unknown or unsupported mode, dtype or shape mismatch.
    """
    with Args("dequantize", None) as a:
        qr = a.input(q, "q", dtype, contiguous=True)
        sr = a.input(scales, "scales", contiguous=True)
        name = dtype_arg(output_dtype, "output_dtype")
        output, outr = a.output(out, "out", tuple(qr.shape), name, like=q)
        group = 0 if group_size is None else as_int(group_size, "group_size")
    _commfuse.dequantize(qr, sr, str(mode), outr, group)
    return output
