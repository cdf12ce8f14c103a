"""Helpers shared by the quantized operators' wrappers (not public)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from .. import _commfuse
from .._convert import pack_int4, unpack_int4
from .._dtypes import INT4, canonical
from .._errors import InvalidArgument
from .._tensor import Args, as_int, dense_or_transposed


def maybe_int4_input(a: Args, x: Any, what: str,
                     dtype: Optional[npt.DTypeLike]) -> tuple[_commfuse.TensorRef, bool]:
    """(TensorRef, unpacked) for an operand that may be int4.

    An ``ml_dtypes.int4`` numpy array (one value per byte) is packed two per byte here (a
    copy: libcommfuse's int4 is packed); already-packed uint8 bytes come with
    ``dtype="int4"`` and are passed as they are. Anything else is a dense input.
    """
    if isinstance(x, np.ndarray) and x.dtype == INT4:
        if dtype is not None and dtype_arg(dtype, f"{what}_dtype") != "int4":
            raise InvalidArgument(f"{what}: an ml_dtypes.int4 array cannot hold {dtype}")
        if x.ndim < 1 or x.shape[-1] % 2:
            raise InvalidArgument(f"{what}: int4 shape {x.shape} needs an even last dim "
                                  "(two elements per byte)")
        return a.input(pack_int4(x), what, "int4", contiguous=True), True
    # x2 in place where it is dense or a transposed view (dense_or_transposed); x1 dense.
    dense = what == "x2" and dense_or_transposed(x)
    return a.input(x, what, dtype, contiguous=not dense), False


def dtype_arg(dtype: npt.DTypeLike, what: str) -> str:
    """commfuse name of a dtype argument; inside ``Args`` (which prefixes the function), an
    unknown one raises InvalidArgument starting with ``what``."""
    try:
        return canonical(dtype, what, "")
    except InvalidArgument as e:
        # canonical's own errors start with what; the C++ name lookup's do not.
        message = e.message if e.message.startswith(what) else f"{what}: {e.message}"
        raise InvalidArgument(message, e.code) from None


def unpack(packed: np.ndarray) -> np.ndarray:
    """Packed int4 bytes (r, c/2) -> ml_dtypes.int4 array (r, c)."""
    return unpack_int4(packed).view(INT4)


def check_world_size(a: Args, world_size: int) -> int:
    """The group's size R, after checking the caller's ``world_size`` against it (as the
    C++ ops that take world_size do); an unknown group is left to the C++ op to report."""
    w = as_int(world_size, "world_size", 32)
    if a.world_size > 0 and w != a.world_size:
        raise InvalidArgument(f"world_size is {w} but group has {a.world_size} ranks")
    return a.world_size if a.world_size > 0 else max(w, 1)


# x1 dtypes that select SPEC §6's quantized mode of the three matmul + collective ops.
QUANT_MATMUL_DTYPES = frozenset({"int8", "float8_e4m3fn", "float8_e5m2", "hifloat8"})


def quant_matmul_args(a: Args, x1: _commfuse.TensorRef, x1_scale: Any, x2_scale: Any,
                      output_dtype: Optional[npt.DTypeLike]
                      ) -> tuple[Optional[_commfuse.TensorRef], Optional[_commfuse.TensorRef], str]:
    """(x1_scale, x2_scale, output dtype name) of a matmul op (SPEC §6): the scales as given
    (the op checks them), the output dtype as given, else bfloat16 for quantized x1 (as
    torch_npu) and x1's own dtype otherwise."""
    s1 = a.optional(x1_scale, "x1_scale", contiguous=True)
    s2 = a.optional(x2_scale, "x2_scale", contiguous=True)
    if output_dtype is not None:
        name = dtype_arg(output_dtype, "output_dtype")
    else:
        name = "bfloat16" if x1.dtype in QUANT_MATMUL_DTYPES else x1.dtype
    return s1, s2, name
