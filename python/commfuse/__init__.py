"""commfuse: fused communication + computation operators, Python API.

This first version exposes the number formats of SPEC §1 (``convert``, ``pack_int4``,
``unpack_int4``) and the error classes. Every conversion runs in libcommfuse (C++);
this module only maps numpy / ml_dtypes arrays onto its flat buffers.

Formats and their numpy representation:

=================  ==========================  ======================================
commfuse name      numpy dtype                 notes
=================  ==========================  ======================================
float32            numpy.float32
float16            numpy.float16
bfloat16           ml_dtypes.bfloat16
float8_e4m3fn      ml_dtypes.float8_e4m3fn
float8_e5m2        ml_dtypes.float8_e5m2
float8_e8m0        ml_dtypes.float8_e8m0fnu    alias "float8_e8m0fnu"; 0x00 = 2^-127
hifloat8           numpy.uint8 (raw codes)     no numpy dtype exists for HiF8
int4               ml_dtypes.int4              one value per byte (see pack_int4)
int8/int32/int64   numpy.int8/int32/int64
=================  ==========================  ======================================
"""

from __future__ import annotations

from typing import Any, Optional

import ml_dtypes
import numpy as np
import numpy.typing as npt

from . import _commfuse

__all__ = [
    "__version__",
    "convert",
    "pack_int4",
    "unpack_int4",
    "Error",
    "NullPointerError",
    "InvalidArgument",
    "RuntimeFailure",
    "InternalError",
]

#: Version of the loaded libcommfuse ("0.1.0").
__version__: str = _commfuse.version()


# --------------------------------------------------------------------------- errors


class Error(Exception):
    """Base of every commfuse error.

    ``code`` is the SPEC §0 status (numeric values shared with CANN's aclnn) and
    ``message`` the one-line message naming the function, argument and value.
    Errors raised by libcommfuse (C++ ``commfuse::Error`` and subclasses) arrive as the
    subclass matching their status.
    """

    #: SPEC §0 status code of this class (an instance may carry its own).
    code: int = 561000

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = int(code)

    @property
    def status(self) -> str:
        """Fixed name of the status code, e.g. ``"PARAM_INVALID"``."""
        return _commfuse.status_name(self.code)

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.code))


class NullPointerError(Error):
    """A required pointer or tensor was null (PARAM_NULLPTR, 161001)."""

    code = 161001


class InvalidArgument(Error, ValueError):
    """Wrong dtype, shape, attribute value or group (PARAM_INVALID, 161002)."""

    code = 161002


class RuntimeFailure(Error, RuntimeError):
    """Peer failure, timeout, transport error, out of memory (RUNTIME_ERROR, 361001)."""

    code = 361001


class InternalError(Error):
    """An internal invariant broke: a commfuse bug (INNER, 561000)."""

    code = 561000


_commfuse._register_errors(Error, NullPointerError, InvalidArgument, RuntimeFailure,
                           InternalError)

# --------------------------------------------------------------------------- dtypes

# commfuse canonical name -> numpy dtype of arrays holding that format.
_NUMPY_DTYPES = {
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
}
_INT4 = _NUMPY_DTYPES["int4"]


def _format_of(dt: np.dtype) -> Optional[str]:
    """commfuse name of an array dtype that is itself a format (uint8 is not: raw codes)."""
    for name, candidate in _NUMPY_DTYPES.items():
        if name != "hifloat8" and dt == candidate:
            return name
    return None


def _canonical(dtype: npt.DTypeLike, what: str) -> str:
    """commfuse name of a dtype given as a name string or a numpy / ml_dtypes dtype."""
    if isinstance(dtype, str):
        return _commfuse.dtype_name(dtype)  # C++ raises InvalidArgument naming it
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InvalidArgument(f"convert: {what} {dtype!r} is not a dtype") from None
    name = _format_of(dt)
    if name is None:
        known = ", ".join(_NUMPY_DTYPES)
        raise InvalidArgument(
            f"convert: {what} {dt} is not a commfuse format (known: {known}; "
            "HiFloat8 is named by the string 'hifloat8')")
    return name


def _as_array(array: npt.ArrayLike) -> np.ndarray:
    """C-contiguous, native-byte-order ndarray (a copy only where needed)."""
    arr = np.asarray(array)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    return arr


def _bytes(arr: np.ndarray) -> np.ndarray:
    """Flat uint8 view of a C-contiguous array."""
    return arr.reshape(-1).view(np.uint8)


def _source(arr: np.ndarray, src_dtype: Optional[npt.DTypeLike]) -> tuple[np.ndarray, str]:
    """(flat byte view, commfuse name) describing the input buffer."""
    if src_dtype is None:
        name = _format_of(arr.dtype)
        if name is None:
            hint = ("pass src_dtype= to name the format of raw codes (e.g. src_dtype='hifloat8')"
                    if arr.dtype.kind == "u" else
                    "cast to float32 first" if arr.dtype.kind in "fc" else
                    "supported: " + ", ".join(n for n in _NUMPY_DTYPES if n != "hifloat8"))
            raise InvalidArgument(f"convert: input dtype {arr.dtype} is not a commfuse format; "
                                  f"{hint}")
    else:
        name = _canonical(src_dtype, "src_dtype")
        if name == "int4":
            if arr.dtype not in (_INT4, np.dtype(np.int8)):
                raise InvalidArgument(
                    f"convert: src_dtype int4 needs an int4 or int8 array (one value per "
                    f"byte), got {arr.dtype}")
            if arr.dtype == np.int8:
                # An int8 array claimed to be int4: pack_int4 checks the [-8, 7] range.
                return pack_int4(arr).reshape(-1), "int4"
        else:
            expected = _NUMPY_DTYPES[name]
            bits = _commfuse.dtype_bits(name)
            raw = arr.dtype.kind == "u" and arr.dtype.itemsize * 8 == bits
            if arr.dtype != expected and not raw:
                raise InvalidArgument(
                    f"convert: src_dtype {name} needs a {expected} array or raw "
                    f"uint{bits} codes, got {arr.dtype}")
    if name == "int4":
        # ml_dtypes int4 holds one value per byte but only the low nibble counts (its own
        # casts store -3 as 0x0D, its negation as 0xFD): let ml_dtypes read the values.
        return _bytes(arr.astype(np.int8)), "int8"
    return _bytes(arr), name


# --------------------------------------------------------------------------- API


def convert(array: npt.ArrayLike, dtype: npt.DTypeLike, saturate: bool = False,
            src_dtype: Optional[npt.DTypeLike] = None) -> np.ndarray:
    """Convert an array to another number format with the rules of SPEC §1.

    Args:
        array: numpy array of float32, float16, int8, int32, int64, or ml_dtypes
            bfloat16, float8_e4m3fn, float8_e5m2, float8_e8m0fnu, int4. Raw codes
            (uint8, or uint16/uint32 bit patterns) are accepted together with
            ``src_dtype``. Any layout: a non-contiguous array is copied first.
        dtype: target format: a numpy / ml_dtypes dtype or type, or a name
            ("float32", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"
            / "float8_e8m0", "hifloat8", "int4", "int8", "int32", "int64",
            "float16"; aliases such as "bf16" or "fp16" work too).
        saturate: clamp out-of-range values to the largest finite value of the fp8,
            HiFloat8 and E8M0 formats instead of producing inf / NaN. Integer targets
            always saturate (and round half to even).
        src_dtype: format of ``array``'s contents, for arrays whose numpy dtype does
            not say it: ``convert(codes, "float32", src_dtype="hifloat8")`` decodes
            HiFloat8 codes held in a uint8 array.

    Returns:
        A new array with ``array``'s shape and the target's numpy dtype (see the
        module docstring); HiFloat8 results are uint8 arrays of raw codes and int4
        results ml_dtypes.int4 arrays, one value per byte, stored sign-extended (so
        ``.view(numpy.int8)`` gives the values; ml_dtypes reads only the low nibble).

    Raises:
        InvalidArgument: unknown dtype name, unsupported input dtype, or an int8 array
            passed as src_dtype="int4" holding values outside [-8, 7].
    """
    arr = _as_array(array)
    src, src_name = _source(arr, src_dtype)
    dst_name = _canonical(dtype, "dtype")
    count = arr.size
    saturate = bool(saturate)
    if dst_name == "int4":
        # libcommfuse's int4 is packed two per byte; numpy's is one per byte.
        packed = np.zeros((count + 1) // 2, dtype=np.uint8)
        _commfuse.convert(src, src_name, packed, "int4", count, saturate)
        out = np.empty(arr.shape, dtype=np.int8)
        _commfuse.unpack_int4(packed, out.reshape(-1), count)
        return out.view(_INT4)
    out = np.empty(arr.shape, dtype=_NUMPY_DTYPES[dst_name])
    _commfuse.convert(src, src_name, _bytes(out), dst_name, count, saturate)
    return out


def pack_int4(array: npt.ArrayLike) -> np.ndarray:
    """Pack int4 values two per byte: element 2j in the low nibble of byte j (SPEC §1).

    Args:
        array: integers in [-8, 7]: an int8 or ml_dtypes.int4 array, or any integer
            array (its values are range-checked before narrowing).

    Returns:
        uint8 array of the packed bytes. When the last dimension c is even the shape is
        ``array.shape[:-1] + (c // 2,)`` (rows stay rows); otherwise it is flat with
        ``ceil(array.size / 2)`` bytes and the unused high nibble of the last byte is 0.

    Raises:
        InvalidArgument: a value outside [-8, 7], or a non-integer array.
    """
    arr = _as_array(array)
    if arr.dtype == _INT4:
        arr = arr.astype(np.int8)  # only the low nibble of each byte counts (see _source)
    elif arr.dtype.kind not in "iu":
        raise InvalidArgument(f"pack_int4: needs an integer array, got {arr.dtype}")
    elif arr.dtype != np.int8:
        bad = np.flatnonzero((arr < -8) | (arr > 7))
        if bad.size:
            i = int(bad[0])
            raise InvalidArgument(f"pack_int4: src[{i}] is {arr.reshape(-1)[i]} but int4 holds "
                                  "[-8, 7]")
        arr = arr.astype(np.int8)
    count = arr.size
    if arr.ndim >= 1 and arr.shape[-1] % 2 == 0:
        shape: tuple[int, ...] = arr.shape[:-1] + (arr.shape[-1] // 2,)
    else:
        shape = ((count + 1) // 2,)
    out = np.zeros(shape, dtype=np.uint8)
    _commfuse.pack_int4(arr.reshape(-1), out.reshape(-1), count)
    return out


def unpack_int4(packed: npt.ArrayLike, count: Optional[int] = None) -> np.ndarray:
    """Unpack int4 elements packed two per byte (element 2j in the low nibble of byte j).

    Args:
        packed: uint8 (or int8) array of packed bytes.
        count: number of elements to unpack; at most ``2 * packed.size``. None unpacks
            every nibble and keeps the row structure: shape
            ``packed.shape[:-1] + (2 * packed.shape[-1],)``.

    Returns:
        int8 array of values in [-8, 7]: 1-D with ``count`` elements when count is given.
        ``.view(ml_dtypes.int4)`` turns it into an ml_dtypes int4 array.

    Raises:
        InvalidArgument: count negative or larger than the packed data holds, or packed
            not an 8-bit integer array.
    """
    arr = _as_array(packed)
    if arr.dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise InvalidArgument(f"unpack_int4: packed must be a uint8 array, got {arr.dtype}")
    if count is None:
        shape: tuple[int, ...] = (arr.shape[:-1] + (2 * arr.shape[-1],)) if arr.ndim else (2,)
        n = 2 * arr.size
    else:
        n = int(count)
        if n < 0 or n > 2 * arr.size:
            raise InvalidArgument(f"unpack_int4: count is {count} but {arr.size} packed bytes "
                                  f"hold at most {2 * arr.size} elements")
        shape = (n,)
    out = np.empty(shape, dtype=np.int8)
    _commfuse.unpack_int4(_bytes(arr), out.reshape(-1), n)
    return out
