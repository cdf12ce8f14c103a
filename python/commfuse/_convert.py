"""Number formats (SPEC §1): convert, pack_int4, unpack_int4. Every conversion runs in
libcommfuse (C++); this module only maps numpy / ml_dtypes arrays onto its flat buffers."""

from __future__ import annotations

from typing import Optional

import numpy as np
import numpy.typing as npt

from . import _commfuse
from ._dtypes import DATA_MOVEMENT, INT4, NUMBER_FORMATS, NUMPY_DTYPES, canonical, format_of
from ._errors import InvalidArgument
from ._tensor import as_bool


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
        name = format_of(arr.dtype)
        # uint8 / int16 / uint16 / bool only move through the collectives; a uint8 array here
        # most likely holds HiFloat8 codes whose src_dtype was forgotten.
        if name is None or name in DATA_MOVEMENT:
            hint = ("pass src_dtype= to name the format of raw codes (e.g. src_dtype='hifloat8')"
                    if arr.dtype.kind == "u" else
                    "cast to float32 first" if arr.dtype.kind in "fc" else
                    "supported: " + ", ".join(n for n in NUMBER_FORMATS if n != "hifloat8"))
            raise InvalidArgument(f"convert: input dtype {arr.dtype} is not a number format "
                                  f"convert handles; {hint}")
    else:
        name = canonical(src_dtype, "src_dtype")
        if name == "int4":
            if arr.dtype not in (INT4, np.dtype(np.int8)):
                raise InvalidArgument(
                    f"convert: src_dtype int4 needs an int4 or int8 array (one value per "
                    f"byte), got {arr.dtype}")
            if arr.dtype == np.int8:
                # An int8 array claimed to be int4: pack_int4 checks the [-8, 7] range.
                return pack_int4(arr).reshape(-1), "int4"
        else:
            expected = NUMPY_DTYPES[name]
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
        InvalidArgument: unknown dtype name, unsupported input dtype (the data-movement
            dtypes uint8, int16, uint16 and bool included: they have no conversion rules),
            or an int8 array passed as src_dtype="int4" holding values outside [-8, 7].
    """
    arr = _as_array(array)
    src, src_name = _source(arr, src_dtype)
    dst_name = canonical(dtype, "dtype")
    count = arr.size
    try:
        saturate = as_bool(saturate, "saturate")
    except InvalidArgument as e:
        raise InvalidArgument(f"convert: {e.message}") from None
    if dst_name == "int4":
        # libcommfuse's int4 is packed two per byte; numpy's is one per byte.
        packed = np.zeros((count + 1) // 2, dtype=np.uint8)
        _commfuse.convert(src, src_name, packed, "int4", count, saturate)
        out = np.empty(arr.shape, dtype=np.int8)
        _commfuse.unpack_int4(packed, out.reshape(-1), count)
        return out.view(INT4)
    out = np.empty(arr.shape, dtype=NUMPY_DTYPES[dst_name])
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
    if arr.dtype == INT4:
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
