"""PackedWeight: a weight packed once, ahead of the matmul operators' calls (IPEX's
prepacked weights)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _commfuse
from ._dtypes import INT4
from ._errors import Error, InvalidArgument, NullPointerError
from ._tensor import as_bool, as_int, tensor_ref


class PackedWeight:
    """``x2`` packed once into the blocked layout this machine's native 16-bit GEMM reads
    (oneDNN's brgemm on AVX512-BF16 / AMX), which it otherwise copies ``x2`` into on every
    call: most of a decode step's time. An int8 ``x2`` (A8W8; alltoall_quant_matmul's
    A16W8) is prepared as this machine's int8 GEMM reads it: oneDNN's s8 layout (VNNI /
    AMX), or without VNNI as int16 pairs for AVX2's vpmaddwd kernel or widened to float32
    for the exact f32-blocked path, whichever this process chose (where an A8W8 or A16W8 call
    of at most 32 rows reads x2 in place instead). For alltoall_quant_matmul ``rows`` is
    BS/R, the rows each rank multiplies.

    Pass it as ``packed_x2=`` to :func:`all_gather_base_mm`, :func:`mm_reduce_scatter_base`,
    :func:`mm_all_reduce_base`, :func:`alltoall_matmul` or :func:`alltoall_quant_matmul`
    (A16W8, A16W4) (the alltoall ops with ``transpose_x2=True``: pack ``x2.T``) together with the ``x2`` it was packed from: that array
    itself (the ops compare its address, dtype, shape and strides; another array is
    InvalidArgument), whose contents must not change while the packed form is used (pack
    again after updating it). It keeps ``x2`` alive. Where this machine's GEMM of ``rows``
    rows reads ``x2`` as given (float32; float16 or bfloat16 without a native kernel; the
    direct small-m kernel) nothing is packed, :attr:`packed` is False (:attr:`description`
    says why) and the ops read ``x2`` as given. Not supported: fp8 and HiFloat8
    ``x2``, CUDA tensors.

    An int4 ``x2`` (alltoall_quant_matmul's A16W4) is given as the packed uint8 bytes the op
    is given, with ``x2_dtype="int4"`` (an ``ml_dtypes.int4`` array is packed into a new copy
    on every call, which no PackedWeight can match: InvalidArgument), and
    ``transpose_x2=True`` where the op takes it so: the bytes then hold the (N, R*H) buffer.
    It is unpacked and prepared as oneDNN's s8 GEMM reads it where that GEMM packs its
    weights (VNNI / AMX); elsewhere nothing is packed. A4W4 does not take a PackedWeight.

    Args:
        x2: (k, n) host array, float32, float16, bfloat16 (``ml_dtypes.bfloat16`` or a
            torch tensor), int8, or int4 bytes (``x2_dtype="int4"``); a transposed view of
            an (n, k) array (``w.T``) is packed as the (k, n) matrix it shows.
        rows: the rows a call's GEMM usually takes at once (all_gather_base_mm: m·R; the
            reducing ops: m), which picks the layout; 0: 256.
        x2_dtype: "int4" for packed int4 bytes (as the op's ``x2_dtype``); else None.
        transpose_x2: ``x2`` is the (n, k) buffer (as the alltoall ops' ``transpose_x2``):
            packed as its (k, n) view, the matrix the op multiplies.
    """

    __slots__ = ("_native",)

    def __init__(self, x2: Any, rows: int = 0, *, x2_dtype: Any = None,
                 transpose_x2: bool = False) -> None:
        if isinstance(x2, np.ndarray) and x2.dtype == INT4:
            raise InvalidArgument(
                "PackedWeight: x2 is an ml_dtypes.int4 array, which the ops pack into a new "
                "copy on every call: pass its packed uint8 bytes (commfuse.pack_int4) with "
                "x2_dtype=\"int4\", to PackedWeight and to the op alike")
        try:
            transpose = as_bool(transpose_x2, "transpose_x2")
        except InvalidArgument as e:
            raise InvalidArgument(f"PackedWeight: {e.message}") from None
        if transpose and len(getattr(x2, "shape", ())) != 2:
            raise InvalidArgument(
                f"PackedWeight: x2 must be 2-D (the (n, k) buffer with transpose_x2) but has "
                f"shape {tuple(getattr(x2, 'shape', ()))}")
        if x2 is None:
            raise NullPointerError("PackedWeight: x2 is None (a required tensor)")
        try:
            ref = tensor_ref(x2, x2_dtype)
        except Error as e:
            raise type(e)(f"PackedWeight: x2: {e.message}", e.code) from None
        try:
            rows = as_int(rows, "rows")
        except InvalidArgument as e:
            raise InvalidArgument(f"PackedWeight: {e.message}") from None
        self._native = _commfuse.PackedWeight(ref, rows, transpose)

    @property
    def packed(self) -> bool:
        """Whether a packed form was made (else the ops read x2 as given)."""
        return bool(self._native.packed)

    @property
    def packed_bytes(self) -> int:
        """The packed form's size in bytes, padding included (0 when not packed)."""
        return int(self._native.packed_bytes)

    @property
    def description(self) -> str:
        """What was packed, in which layout, or why nothing was."""
        return str(self._native.description)

    def __repr__(self) -> str:
        return f"PackedWeight({self.description})"


def native_packed(packed_x2: Optional[PackedWeight]) -> Any:
    """The binding's object for an op's ``packed_x2`` argument (None: None)."""
    if packed_x2 is None:
        return None
    if type(packed_x2) is not PackedWeight:
        raise InvalidArgument(
            f"packed_x2 must be a commfuse.PackedWeight, got {type(packed_x2).__name__}")
    return packed_x2._native
