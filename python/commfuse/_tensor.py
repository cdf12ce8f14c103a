"""Arrays in and out of libcommfuse, without copies where the layout allows.

The one place that turns a caller's array into a ``_commfuse.TensorRef`` (the C++
``TensorView`` over the array's own memory) and allocates results. Every operator and
collective goes through :class:`Args`, so an argument problem found in Python fails the
whole group at once (like one found in C++) instead of leaving the peers waiting.

Accepted arrays:

- numpy arrays of every format in ``_dtypes.NUMPY_DTYPES`` (ml_dtypes formats are passed
  as same-width unsigned views of the same memory: numpy cannot export them itself);
  raw codes (HiFloat8 in uint8, packed int4 in uint8) with ``dtype=``. A uint8 array
  without ``dtype=`` is plain uint8 data (as are int16, uint16 and bool arrays).
- any CPU tensor with ``__dlpack__`` (torch, jax, ...); torch float8 tensors are passed as
  uint8 views, since DLPack exporters may not support float8.
- CUDA tensors (torch, or any DLPack array on a CUDA device), for the operators (not
  quantize / dequantize or the collectives): they run on the tensors' GPU, which must be the
  current device (``torch.cuda.set_device``), queued on torch's current stream of that
  device (:func:`stream_of`); results are allocated on that device for torch tensors (other
  arrays pass theirs with ``out=``). Everything else rejects them.
- anything else ``numpy.asarray`` accepts (lists, scalars): converted, which copies; the
  result's dtype must be one of the above (a Python float becomes float64, which is not:
  pass ``np.float32(v)`` or an array).

A 0-d array (a numpy or torch scalar) is one element, passed as shape (1,): a scalar bias or
scale is a one-element one, a scalar collective moves one element (its result is 0-d).

Inputs the C++ op needs dense (x1, bias, collective sources) are copied when a numpy
array is not C-contiguous; x2 is passed with its strides where the operator reads it so (a
transposed view; for the SPEC §2 ops also a row block: :func:`weight_in_place`,
:func:`dense_or_transposed`), else copied.
Outputs are never copied: an ``out=`` array must be dense and writable.
"""

from __future__ import annotations

import operator
import sys
from types import TracebackType
from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

from . import _commfuse
from ._dtypes import INT4, NUMPY_DTYPES, TORCH_DTYPES, canonical, format_of
from ._errors import Error, InvalidArgument, NullPointerError

_KDL_CUDA = 2  # DLPack's device type of CUDA memory
_UINT_OF_SIZE = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                 8: np.dtype(np.uint64)}
# numpy dtypes that numpy itself exports (DLPack / buffer protocol); ml_dtypes' are not.
_NUMPY_OWN = {np.dtype(t) for t in (np.float32, np.float16, np.int8, np.int16, np.int32,
                                    np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                                    np.bool_)}
# The per-call fast path of tensor_ref: a native numpy dtype -> (commfuse name, the unsigned
# dtype of the same width its memory is passed as, or None when numpy exports it itself).
# A tiny op costs a few microseconds in C++, so the argument handling must cost less.
_FAST = {dt: (name, None if dt in _NUMPY_OWN else _UINT_OF_SIZE[dt.itemsize])
         for name, dt in NUMPY_DTYPES.items() if name not in ("hifloat8", "int4")}
_FAST_NAMES = frozenset(name for name, _ in _FAST.values())


def is_torch(x: Any) -> bool:
    """Whether x is a torch.Tensor, a subclass defined outside torch included (its stream
    and its results' type follow torch's rules). torch is not imported here: a tensor in
    hand means it already is."""
    if type(x).__module__.split(".", 1)[0] == "torch":
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _numpy_ref(x: np.ndarray, name: Optional[str], contiguous: bool,
               output: bool) -> _commfuse.TensorRef:
    if x.dtype == INT4:
        raise InvalidArgument("int4 tensors are packed two per byte: pass "
                              "commfuse.pack_int4(x) with dtype='int4'")
    if not x.dtype.isnative:  # first: the format of '>f4' is float32's
        if output:
            raise InvalidArgument(f"array has non-native byte order ({x.dtype})")
        x = x.astype(x.dtype.newbyteorder("="))
    if name is None:
        name = format_of(x.dtype)
        if name is None:
            hint = ("raw codes need dtype= (e.g. dtype='hifloat8')" if x.dtype.kind == "u"
                    else "supported: " + ", ".join(n for n in NUMPY_DTYPES if n != "hifloat8"))
            raise InvalidArgument(f"array dtype {x.dtype} is not a commfuse format; {hint}")
    if any(st % x.itemsize for st in x.strides):  # a field of a record array, say
        if output:  # DLPack (and the buffer protocol here) count strides in elements
            raise InvalidArgument(f"array strides {x.strides} (bytes) are not multiples of "
                                  f"its itemsize {x.itemsize}")
        x = np.ascontiguousarray(x)
    if contiguous and not output and not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if x.dtype not in _NUMPY_OWN:  # ml_dtypes formats: the same memory as unsigned codes
        own = format_of(x.dtype)
        if own != name:  # as unsigned codes, C++ would take them for codes of `name`
            raise InvalidArgument(f"an array of {own or x.dtype} cannot hold {name} (needs "
                                  f"{name} or raw uint{8 * x.itemsize} codes)")
        x = x.view(_UINT_OF_SIZE[x.dtype.itemsize])
    return _commfuse.TensorRef(x, name, read_only=not x.flags.writeable)


def _torch_ref(x: Any, name: Optional[str], contiguous: bool,
               output: bool) -> _commfuse.TensorRef:
    import torch  # only reached with a torch tensor in hand

    own = TORCH_DTYPES.get(str(x.dtype))
    if name is None:
        name = own
    if contiguous and not output and not x.is_contiguous():
        x = x.contiguous()
    # element_size(), not dtype.itemsize: torch.dtype has itemsize only from torch 2.1.
    if x.element_size() == 1 and x.dtype not in (torch.int8, torch.uint8):
        if own != name:  # as uint8, C++ would take them for codes of `name`
            raise InvalidArgument(f"a tensor of {own or x.dtype} cannot hold {name} (needs "
                                  f"{name} or raw uint8 codes)")
        x = x.view(torch.uint8)  # float8: DLPack exporters may not support it
    return _commfuse.TensorRef(x.detach(), name)


def _fast_numpy_ref(x: Any, contiguous: bool, output: bool) -> Optional[_commfuse.TensorRef]:
    """tensor_ref of a numpy array of a native commfuse dtype that needs no copy; None for
    anything else (the general path decides)."""
    if type(x) is not np.ndarray:
        return None
    fast = _FAST.get(x.dtype)
    if fast is None:
        return None
    flags = x.flags
    if contiguous and not output and not flags.c_contiguous:
        return None
    own, unsigned = fast
    try:  # anything unusual (strides not in whole elements) takes the general path
        return _commfuse.TensorRef(x if unsigned is None else x.view(unsigned), own,
                                   read_only=not flags.writeable)
    except Exception:
        return None


def dense_or_transposed(x: Any) -> bool:
    """Whether a 2-D weight is dense or the transposed view of a dense array: the alltoall
    operators read both in place (and a PackedWeight made from the view matches it), so
    such an x2 is not copied. Arrays other than numpy and torch go as they are (libcommfuse
    checks)."""
    if isinstance(x, np.ndarray):
        return x.ndim == 2 and (x.flags.c_contiguous or x.flags.f_contiguous)
    if is_torch(x):
        return x.dim() == 2 and (x.is_contiguous() or x.t().is_contiguous())
    return True


def weight_in_place(x: Any) -> bool:
    """Whether the SPEC §2 operators read a 2-D weight (x2) as it is, the rule of
    libcommfuse's weight_layout (src/ops/common/tensor_checks.cpp): rows dense, with any row
    step (a row block of a wider buffer too), or the transposed view of such. They copy any
    other x2 (negative or zero strides, a column step) before the call. Arrays other than
    numpy and torch go as they are (libcommfuse checks)."""
    if isinstance(x, np.ndarray):
        if x.ndim != 2:
            return False
        # In bytes, without a loop: this runs in the tiny operators' per-call fast path.
        e = x.itemsize
        (k, n), (b0, b1) = x.shape, x.strides
        return (((b1 == e or n == 1) and b0 >= n * e and b0 >= e and b0 % e == 0)
                or ((b0 == e or k == 1) and b1 >= k * e and b1 >= e and b1 % e == 0))
    if is_torch(x):
        if x.dim() != 2:
            return False
        (k, n), (s0, s1) = x.shape, x.stride()
        return (((s1 == 1 or n == 1) and s0 >= n and s0 >= 1)
                or ((s0 == 1 or k == 1) and s1 >= k and s1 >= 1))
    return True


def fast_matmul_inputs(x1: Any, x2: Any, bias: Any) -> Optional[tuple[Any, Any, Any]]:
    """The per-call fast path of a matmul operator's inputs: (x1, x2, bias) TensorRefs when
    x1 and x2 (2-D) and bias (or None) are numpy arrays of native commfuse dtypes that need
    no copy, else None (then the op takes the general path through :class:`Args`, which
    converts, copies or rejects). A tiny op costs a few microseconds in C++, so its wrapper
    must cost less. Never raises."""
    if type(x1) is not np.ndarray or type(x2) is not np.ndarray or not weight_in_place(x2):
        return None
    x1r = _fast_numpy_ref(x1, True, False)
    x2r = _fast_numpy_ref(x2, False, False)
    biasr = None if bias is None else _fast_numpy_ref(bias, True, False)
    if x1r is None or x2r is None or (biasr is None and bias is not None):
        return None
    return x1r, x2r, biasr


def fast_output(out: Any, shape: tuple[int, ...], like: np.ndarray) -> Optional[tuple[Any, Any]]:
    """(array, ref) for an operator's result on the fast path: a new numpy array of like's
    dtype when out is None, else out itself when it is a numpy array of like's dtype and the
    expected shape (anything else: None, the general path). Never raises."""
    if out is None:
        try:  # out of memory: the general path raises it, telling the group
            out = np.empty(shape, like.dtype)
        except Exception:
            return None
    elif type(out) is not np.ndarray or out.dtype != like.dtype or out.shape != shape:
        return None
    ref = _fast_numpy_ref(out, False, True)
    return None if ref is None else (out, ref)


def tensor_ref(x: Any, dtype: Optional[npt.DTypeLike] = None, *, contiguous: bool = False,
               output: bool = False) -> _commfuse.TensorRef:
    """The TensorRef for one argument (see the module docstring). ``dtype`` names the format
    of raw codes; ``contiguous`` copies a non-dense numpy input; ``output`` forbids copies."""
    if dtype is None:
        ref = _fast_numpy_ref(x, contiguous, output)
        if ref is not None:
            return ref
    # No function in canonical's errors: every caller puts the function and the argument in
    # front (``all_reduce(rank 0): x: dtype 123 is not a dtype``).
    name = None if dtype is None else canonical(dtype, "dtype", "")
    if isinstance(x, np.ndarray):
        return _numpy_ref(x, name, contiguous, output)
    if is_torch(x):
        return _torch_ref(x, name, contiguous, output)
    if hasattr(x, "__dlpack__"):
        if output and x.__dlpack_device__()[0] != _KDL_CUDA:
            # Through numpy, which keeps DLPack's read-only flag: an immutable buffer (bytes,
            # JAX) was written in place. CUDA outputs are torch tensors (empty()).
            try:
                host = np.from_dlpack(x)
            except (BufferError, TypeError, RuntimeError):  # a dtype numpy cannot import
                host = None
            if host is not None:
                return _numpy_ref(host, name, contiguous, output)
        return _commfuse.TensorRef(x, name)
    if output:
        raise InvalidArgument(f"an output must be an array, got {type(x).__name__}")
    return _numpy_ref(np.asarray(x), name, contiguous, output)


# Formats no array library has a dtype for: held as uint8 codes (int4: two per byte).
_RAW_CODES = ("hifloat8", "int4")
# commfuse name -> torch attribute name of the same dtype (the torch spelling of each).
_TORCH_NAME = {name: t.split(".", 1)[1] for t, name in TORCH_DTYPES.items()}


def empty(shape: Sequence[int], name: str, like: Any = None) -> Any:
    """A new array for a result: a torch tensor when ``like`` is one and this torch has the
    result's dtype (a quantized op's int8 input gives a bfloat16 torch result), else numpy."""
    shape = tuple([d if d > 0 else 0 for d in map(int, shape)])
    if like is not None and type(like) is not np.ndarray and not is_torch(like) and \
            hasattr(like, "__dlpack_device__") and like.__dlpack_device__()[0] == _KDL_CUDA:
        raise InvalidArgument("a CUDA array that is not a torch tensor: pass its results' "
                              "arrays (out=, gather_out=, alltoall_out=) on the same device; "
                              "commfuse allocates device results with torch only")
    if like is not None and type(like) is not np.ndarray and is_torch(like):
        import torch

        if TORCH_DTYPES.get(str(like.dtype)) == name:
            return torch.empty(shape, dtype=like.dtype, device=like.device)
        torch_dtype = getattr(torch, _TORCH_NAME.get(name, ""), None)  # float8: torch >= 2.1
        if name in _RAW_CODES:  # no torch dtype: the codes as bytes, on like's device
            torch_dtype = torch.uint8
        if isinstance(torch_dtype, torch.dtype):
            return torch.empty(shape, dtype=torch_dtype, device=like.device)
    # int4 results are packed bytes, two elements per byte (as libcommfuse writes them).
    return np.empty(shape, dtype=np.uint8 if name == "int4" else NUMPY_DTYPES[name])


def stream_of(x: Any) -> int:
    """The cudaStream_t (as an int) an operator on ``x`` is queued on: torch's current stream
    of x's device for a CUDA torch tensor (PyTorch's own rule), else 0 (host arrays; the
    legacy default stream for other DLPack CUDA arrays)."""
    if type(x) is np.ndarray or not is_torch(x) or not x.is_cuda:
        return 0
    import torch

    return int(torch.cuda.current_stream(x.device).cuda_stream)


def dim(ref: _commfuse.TensorRef, i: int) -> int:
    """ref.shape[i], or 0 when ref has no dim i (the op rejects the shape; allocation must not
    fail before it does)."""
    shape = ref.shape
    return int(shape[i]) if -len(shape) <= i < len(shape) else 0


def as_int(value: Any, what: str, bits: int = 64) -> int:
    """value as a Python int in the signed ``bits``-bit range the library's argument takes
    (numpy integers too); None, 1.5, "1" or 2**70 is InvalidArgument naming ``what``, where
    int() would truncate, parse, or leave the binding to raise a TypeError. Called inside an
    :class:`Args` block, so that a wrong value is rejected for the whole group."""
    try:
        v = operator.index(value)
    except TypeError:
        raise InvalidArgument(f"{what} must be an integer, got {type(value).__name__} "
                              f"{value!r}") from None
    if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise InvalidArgument(f"{what} is {v}, outside the {bits}-bit signed range")
    return v


def as_bool(value: Any, what: str) -> bool:
    """value as a Python bool: a bool, a numpy bool, or the integer 0 or 1; anything else
    (an array, None, 2, "yes") is InvalidArgument naming ``what``, where bool() would raise a
    ValueError (an array of several elements) or quietly take its truth. Called inside an
    :class:`Args` block, so that a wrong value is rejected for the whole group."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # np.array(True), torch
        value = value.item()
        if isinstance(value, bool):
            return value
    try:
        v = operator.index(value)
    except TypeError:
        v = None
    if v in (0, 1):
        return bool(v)
    raise InvalidArgument(f"{what} must be a bool, got {type(value).__name__} {value!r}")


def small_ints(*values: Any) -> bool:
    """True when every value is a plain int within 32 bits: the per-call fast paths pass
    such arguments straight through; anything else takes the general path (as_int)."""
    for v in values:  # a loop, not all() over a generator: half the cost per call
        if type(v) is not int or not -0x80000000 <= v <= 0x7FFFFFFF:
            return False
    return True


def group_name(hcom: Any, fn: str) -> str:
    """The group string of operator ``fn``'s ``hcom`` / ``group`` argument: a name, or an
    object with ``.name`` (a Communicator). Anything else names no group, so its error stays
    on this rank (docs/reliability.md: an hcom that names no communicator)."""
    if isinstance(hcom, str):
        return hcom
    name = getattr(hcom, "name", None)
    if isinstance(name, str):
        return name
    raise InvalidArgument(f"{fn}: hcom must be a communicator name (str) or a Communicator, "
                          f"got {type(hcom).__name__}")


class Args:
    """Prepares one call's arguments; an Error raised inside the ``with`` block gets the
    ``fn(rank r): `` prefix and is told to the group (when it exists) as this rank's
    rejection of the call, so peers already waiting in the op fail at once naming this rank
    and the communicator stays usable, as for errors found in C++. Any other exception
    (TypeError, MemoryError, KeyboardInterrupt, ...) is told to the group the same way and
    propagates unchanged."""

    def __init__(self, fn: str, group: Optional[str]) -> None:
        # group None: a local (not collective) function; errors get the ``fn: `` prefix.
        self.fn = fn
        self.group = group
        self.rank, self.world_size = (-1, -1) if group is None else _commfuse.group_info(group)

    def __enter__(self) -> "Args":
        return self

    def __exit__(self, tp: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool:
        if isinstance(exc, Error):
            if self.group is None:
                raise type(exc)(f"{self.fn}: {exc.message}", exc.code) from None
            message = f"{self.fn}(rank {self.rank}): {exc.message}"
            _commfuse.reject_group(self.group, message)
            raise type(exc)(message, exc.code) from None
        if exc is not None and self.group is not None:
            _commfuse.reject_group(self.group, f"{self.fn}(rank {self.rank}): "
                                   f"{type(exc).__name__}: {exc}")
        return False

    def input(self, x: Any, what: str, dtype: Optional[npt.DTypeLike] = None, *,
              contiguous: bool = False) -> _commfuse.TensorRef:
        if dtype is None:
            ref = _fast_numpy_ref(x, contiguous, False)
            if ref is not None:
                return ref
        if x is None:  # SPEC §0: a required tensor that is null
            raise NullPointerError(f"{what} is None (a required tensor)")
        try:
            return tensor_ref(x, dtype, contiguous=contiguous)
        except Error as e:
            raise type(e)(f"{what}: {e.message}", e.code) from None

    def output(self, out: Any, what: str, shape: Sequence[int], name: str,
               like: Any = None) -> tuple[Any, _commfuse.TensorRef]:
        """(array, ref) for a result: ``out`` when given (never copied), else a new array."""
        if name in _FAST_NAMES:  # the per-call fast path: numpy arrays of name's own dtype
            if out is None and (like is None or type(like) is np.ndarray):
                out = np.empty(tuple([d if d > 0 else 0 for d in map(int, shape)]),
                               NUMPY_DTYPES[name])
            if type(out) is np.ndarray and out.dtype is NUMPY_DTYPES[name]:
                ref = _fast_numpy_ref(out, False, True)
                if ref is not None:
                    return out, ref
        array = empty(shape, name, like) if out is None else out
        raw = (isinstance(array, np.ndarray) and array.dtype.kind == "u" and name not in (
            "int8", "int32", "int64")) or (name in _RAW_CODES and is_torch(array) and
                                          str(array.dtype) == "torch.uint8")
        try:
            ref = tensor_ref(array, name if raw else None, output=True)
        except Error as e:
            raise type(e)(f"{what}: {e.message}", e.code) from None
        return array, ref

    def optional(self, x: Any, what: str, **kw: Any) -> Optional[_commfuse.TensorRef]:
        return None if x is None else self.input(x, what, **kw)
