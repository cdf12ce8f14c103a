"""Low-level bindings of libcommfuse (type stubs). Use the `commfuse` package instead:
these functions take flat byte buffers and dtype names, not shaped arrays."""


import numpy as np
import numpy.typing as npt

_Bytes = npt.NDArray[np.uint8]  # 1-D, C-contiguous
_Int8s = npt.NDArray[np.int8]  # 1-D, C-contiguous

def _register_errors(
    base: type[Exception],
    null_pointer: type[Exception],
    invalid_argument: type[Exception],
    runtime_failure: type[Exception],
    internal_error: type[Exception],
) -> None:
    """Install the Python classes that commfuse::Error and its subclasses are raised as.
    Each is called as cls(message, code)."""

def version() -> str:
    """Version of libcommfuse, e.g. '0.1.0'."""

def status_name(code: int) -> str:
    """Fixed name of a SPEC §0 status code, e.g. 'PARAM_INVALID'."""

def dtype_name(name: str) -> str:
    """Canonical commfuse name of a dtype name or alias ('bf16' -> 'bfloat16').
    Raises InvalidArgument for an unknown name."""

def dtype_bits(name: str) -> int:
    """Bits per element of a dtype (int4: 4)."""

def dtype_code(name: str) -> int:
    """commfuseDataType value (= CANN aclDataType) of a dtype."""

def convert(
    src: _Bytes, src_dtype: str, dst: _Bytes, dst_dtype: str, count: int, saturate: bool = False
) -> None:
    """Convert count elements between flat byte buffers (SPEC §1); int4 is packed."""

def pack_int4(src: _Int8s, dst: _Bytes, count: int) -> None:
    """Pack count int8 values in [-8, 7] into dst, element 2j in the low nibble of byte j."""

def unpack_int4(src: _Bytes, dst: _Int8s, count: int) -> None:
    """Unpack count int4 elements from src into int8 dst."""
