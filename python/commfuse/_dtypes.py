"""The one table of commfuse dtypes and their numpy representation (SPEC §1).

Every module that maps arrays to formats (convert, the operators, the collectives) reads
this table; a new format is one row here (and its name in libcommfuse's dtype table).
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np
import numpy.typing as npt

from . import _commfuse
from ._errors import InvalidArgument

# commfuse canonical name -> numpy dtype of arrays holding that format.
NUMPY_DTYPES = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e8m0": np.dtype(ml_dtypes.float8_e8m0fnu),
    "hifloat8": np.dtype(np.uint8),  # raw codes
    "int4": np.dtype(ml_dtypes.int4),  # unpacked, one value per byte
    "int8": np.dtype(np.int8),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    # Data movement only: broadcast / all_gather / all_to_all copy them bitwise; sums,
    # convert and the operators reject them.
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16),
    "bool": np.dtype(np.bool_),
}
INT4 = NUMPY_DTYPES["int4"]
DATA_MOVEMENT = ("uint8", "int16", "uint16", "bool")
# The formats convert handles (SPEC §1).
NUMBER_FORMATS = tuple(n for n in NUMPY_DTYPES if n not in DATA_MOVEMENT)


# numpy dtype -> commfuse name; uint8 is "uint8" (hifloat8 codes need dtype=).
_FORMAT_OF = {dt: name for name, dt in reversed(NUMPY_DTYPES.items()) if name != "hifloat8"}


def format_of(dt: np.dtype) -> Optional[str]:
    """commfuse name of an array's own dtype: a uint8 array is "uint8" (HiFloat8 codes in
    uint8 are only "hifloat8" when the caller says so with dtype=)."""
    return _FORMAT_OF.get(dt)


def canonical(dtype: npt.DTypeLike, what: str, fn: str = "convert") -> str:
    """commfuse name of a dtype given as a name string, a numpy / ml_dtypes dtype or a torch
    dtype (``output_dtype=torch.bfloat16``, as torch_npu takes it). Errors start with
    ``fn: `` where fn is given, else with ``what``."""
    prefix = f"{fn}: " if fn else ""
    if isinstance(dtype, str):
        return _commfuse.dtype_name(dtype)  # C++ raises InvalidArgument naming it
    if dtype is None:  # np.dtype(None) is float64: say what was passed
        raise InvalidArgument(f"{prefix}{what} is None, not a dtype")
    if type(dtype).__module__ == "torch" and str(dtype) in TORCH_DTYPES:
        return TORCH_DTYPES[str(dtype)]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InvalidArgument(f"{prefix}{what} {dtype!r} is not a dtype") from None
    name = format_of(dt)
    if name is None:
        known = ", ".join(NUMPY_DTYPES)
        raise InvalidArgument(
            f"{prefix}{what} {dt} is not a commfuse format (known: {known}; "
            "HiFloat8 is named by the string 'hifloat8')")
    return name


def numpy_dtype(name: str) -> np.dtype:
    """numpy dtype of arrays holding the commfuse format ``name`` (canonical name)."""
    return NUMPY_DTYPES[name]


# torch dtype (as str(tensor.dtype)) -> commfuse name, for tensors that come through DLPack.
TORCH_DTYPES = {
    "torch.float32": "float32",
    "torch.float16": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float8_e4m3fn": "float8_e4m3fn",
    "torch.float8_e5m2": "float8_e5m2",
    "torch.float8_e8m0fnu": "float8_e8m0",
    "torch.int8": "int8",
    "torch.int32": "int32",
    "torch.int64": "int64",
    # Data movement only; raw codes in uint8 (HiFloat8, packed int4) take dtype=.
    "torch.uint8": "uint8",
    "torch.int16": "int16",
    "torch.uint16": "uint16",
    "torch.bool": "bool",
}
