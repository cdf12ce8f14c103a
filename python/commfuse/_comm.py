"""Communicators and collectives: ``commfuse.init`` and :class:`Communicator`."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

from . import _commfuse
from ._errors import InvalidArgument, NullPointerError
from ._tensor import Args, as_int


class Communicator:
    """A group of ranks that run collectives and fused operators together.

    Made by :func:`init`. ``name`` is the ``hcom`` / ``group`` string the operators take
    (torch_npu's ``get_hccl_comm_name``); an operator also accepts the Communicator itself.
    Collectives are collective: every rank calls them in the same order with matching
    arguments. Sums are float32 in rank order 0..R-1 (int8/int32: exact, saturating), so
    every rank gets the same bits. An argument error — on every rank, or on one (its peers'
    call then raises RuntimeFailure naming it and its message) — and ranks passing
    different element counts, dtypes or roots fail the call on every rank at once and leave
    the communicator usable (the shapes are each rank's own, as in MPI and NCCL: a (2, 3) x
    on one rank and a (3, 2) x on another move the same 6 elements);
    a dead or stalled peer, a timeout or :meth:`abort` make it unusable (:attr:`usable`),
    and later calls raise RuntimeFailure at once.

    Arrays: numpy (ml_dtypes formats included) or CPU DLPack tensors (torch); raw codes
    (HiFloat8 in uint8, int4 packed two per byte in uint8) with ``dtype=``. uint8, int16,
    uint16 and bool arrays move (all_gather, all_to_all, broadcast) but cannot be summed
    (InvalidArgument). Results are new
    arrays unless ``out=`` names a dense, writable array of the result's shape and dtype,
    which is written in place and returned.

    Use it as a context manager, or call :meth:`destroy`, to free it promptly.
    """

    def __init__(self, impl: _commfuse.Comm) -> None:
        self._impl = impl
        # Kept: an operator given this Communicator after destroy() then fails naming itself
        # and the group ("<op>: group '...' ... destroyed"), not "name: ... destroyed".
        self._name = impl.name

    @property
    def rank(self) -> int:
        """This process's rank in [0, world_size)."""
        return self._impl.rank

    @property
    def world_size(self) -> int:
        """Number of ranks R."""
        return self._impl.world_size

    @property
    def name(self) -> str:
        """The ``hcom`` string operators take, e.g. ``"commfuse-1f2e...-w8"`` (also after
        :meth:`destroy`)."""
        return self._name

    @property
    def transport(self) -> str:
        """``"shm"`` (ranks on one host) or ``"mpi"``."""
        return self._impl.transport

    @property
    def usable(self) -> bool:
        """False after a transport failure (dead or stalled peer, timeout, calls out of step,
        a peer that destroyed the communicator on shared memory, a call after MPI_Finalize)
        or :meth:`abort`; :attr:`failure` says which."""
        return self._impl.usable

    @property
    def failure(self) -> str:
        """Why the communicator is unusable; ``""`` while it is usable."""
        return self._impl.failure

    def abort(self, reason: str = "") -> None:
        """Make the communicator unusable on this rank and tell the peers, whose waits for
        this rank then fail at once naming it (``ncclCommAbort``). :meth:`destroy` is still
        needed to free it. A watchdog thread may call it while another thread's call waits
        on a peer: that call then raises :class:`RuntimeFailure` with ``reason``."""
        self._impl.abort(reason)

    def barrier(self) -> None:
        """Return once every rank has called barrier()."""
        self._impl.barrier()

    def _args(self, fn: str) -> Args:
        try:
            name = self._impl.name
        except InvalidArgument:
            raise InvalidArgument(f"{fn}: the communicator was destroyed") from None
        return Args(fn, name)

    def all_gather(self, x: Any, out: Any = None, *, dtype: Optional[npt.DTypeLike] = None) -> Any:
        """Concatenate every rank's ``x`` along dim 0, in rank order.

        Args:
            x: this rank's array, shape (m, ...) (every rank the same shape and dtype; the
                element count and dtype are compared across ranks, the shape is not).
            out: optional result buffer of shape (R·m, ...) (0-d x: (R,)).
            dtype: format of raw codes in x (e.g. ``"hifloat8"``, ``"int4"`` packed).

        Returns:
            (R·m, ...) array: rank s's x at rows [s·m, (s+1)·m).
        """
        with self._args("all_gather") as a:
            src = a.input(x, "x", dtype, contiguous=True)
            r = self._impl.world_size
            shape = (r * src.shape[0],) + tuple(src.shape[1:]) if src.shape else (r,)
            if src.dtype == "int4":  # packed: the result is packed bytes like x
                shape = (r * x.shape[0],) + tuple(x.shape[1:]) if x.ndim else (r,)
            array, dst = a.output(out, "out", shape, src.dtype, like=x)
            _check_out_shape(out, dst, shape)
        self._impl.all_gather(src, dst)
        return array

    def all_reduce(self, x: Any, out: Any = None, *, op: str = "sum",
                   dtype: Optional[npt.DTypeLike] = None) -> Any:
        """Element-wise sum over ranks (float32, float16, bfloat16: fp32 in rank order,
        one rounding; int8/int32: exact, saturating; other dtypes raise InvalidArgument).
        ``out`` may be ``x`` (in place).

        Returns:
            array of x's shape and dtype, bitwise identical on every rank.
        """
        with self._args("all_reduce") as a:
            _check_op(op)
            src = a.input(x, "x", dtype, contiguous=True)
            shape = _storage_shape(x, src)
            array, dst = a.output(out, "out", shape, src.dtype, like=x)
            _check_out_shape(out, dst, shape)
        self._impl.all_reduce(src, dst)
        return array

    def reduce_scatter(self, x: Any, out: Any = None, *, op: str = "sum",
                       dtype: Optional[npt.DTypeLike] = None) -> Any:
        """Sum over ranks, then rank r keeps block r of R.

        Args:
            x: (R·m, ...) array; its elements split into R equal blocks.
            out: optional result buffer of the result's shape.

        Returns:
            (m, ...) array on rank r = sum over ranks s of x_s[r·m:(r+1)·m] (flat when
            x.shape[0] is not a multiple of R but its size is).
        """
        with self._args("reduce_scatter") as a:
            _check_op(op)
            src = a.input(x, "x", dtype, contiguous=True)
            shape = _block_shape(src, self._impl.world_size)
            array, dst = a.output(out, "out", shape, src.dtype, like=x)
            _check_out_shape(out, dst, shape)
        self._impl.reduce_scatter(src, dst)
        return array

    def all_to_all(self, x: Any, out: Any = None, *,
                   dtype: Optional[npt.DTypeLike] = None) -> Any:
        """Block s (of R equal blocks of x) goes to rank s.

        Returns:
            array of x's shape: block s came from rank s (block r of rank s's x).
        """
        with self._args("all_to_all") as a:
            src = a.input(x, "x", dtype, contiguous=True)
            shape = _storage_shape(x, src)
            array, dst = a.output(out, "out", shape, src.dtype, like=x)
            _check_out_shape(out, dst, shape)
        self._impl.all_to_all(src, dst)
        return array

    def broadcast(self, x: Any, root: int = 0, *, dtype: Optional[npt.DTypeLike] = None) -> Any:
        """Overwrite ``x`` on every rank with rank ``root``'s ``x``, in place; returns ``x``.
        ``x`` must be dense and writable on every rank."""
        with self._args("broadcast") as a:
            root = as_int(root, "root", 32)
            if x is None:  # SPEC §0: a required tensor that is null
                raise NullPointerError("x is None (a required tensor)")
            try:
                from ._tensor import tensor_ref
                buf = tensor_ref(x, dtype, output=True)
            except InvalidArgument as e:
                raise InvalidArgument(f"x: {e.message}") from None
        self._impl.broadcast(buf, root)
        return x

    def destroy(self) -> None:
        """Free the communicator now (idempotent). Later calls raise InvalidArgument."""
        self._impl.destroy()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, tp: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.destroy()

    def __repr__(self) -> str:
        if not self._impl.alive:
            return "<commfuse.Communicator destroyed>"
        return (f"<commfuse.Communicator {self.name} rank {self.rank}/{self.world_size} "
                f"{self.transport}>")


def _check_op(op: str) -> None:
    if op != "sum":
        raise InvalidArgument(f"op is {op!r} but only 'sum' is supported")


def _check_out_shape(out: Any, ref: _commfuse.TensorRef, shape: Sequence[int]) -> None:
    """An ``out=`` of another shape than the result's is InvalidArgument, even where its
    element count fits (a (3, 2) out for a (2, 3) result): the array returned is ``out``,
    so its shape is the result's. A 0-d result takes a (1,) out and the reverse. A dense
    array of the right size in another shape: pass its view ``out.reshape(shape)``."""
    if out is None:
        return
    got = tuple(out.shape) if hasattr(out, "shape") else tuple(ref.shape)
    want = tuple(int(d) for d in shape)
    if got != want and not (got in ((), (1,)) and want in ((), (1,))):
        raise InvalidArgument(f"out has shape {got} but the result's is {want}")


def _storage_shape(x: Any, ref: _commfuse.TensorRef) -> tuple[int, ...]:
    """x's own shape (int4: the packed bytes' shape, not the element count; a 0-d x, which
    the library sees as shape (1,): 0-d). An object with only ``__dlpack__`` has no ndim to
    ask (np.ndim would wrap it in a 0-d object array): the library's shape."""
    if ref.dtype == "int4":
        return tuple(x.shape)
    ndim = getattr(x, "ndim", None)
    if ndim is None:
        ndim = len(ref.shape) if hasattr(x, "__dlpack__") else np.ndim(x)
    return () if ndim == 0 else tuple(ref.shape)


def _block_shape(src: _commfuse.TensorRef, r: int) -> tuple[int, ...]:
    shape = tuple(src.shape)
    if shape and shape[0] % r == 0 and src.dtype != "int4":
        return (shape[0] // r,) + shape[1:]
    n = src.numel // r if src.dtype != "int4" else src.numel // r // 2
    return (n,)


def init(rank: Optional[int] = None, world_size: Optional[int] = None,
         init_method: str = "env://") -> Communicator:
    """Join a group of ``world_size`` ranks as ``rank`` (collective: every rank calls it).

    Args:
        rank: this process's rank; None takes it from ``RANK`` (env://) or MPI (mpi).
        world_size: number of ranks; None takes it from ``WORLD_SIZE`` or MPI.
        init_method: how the ranks find each other:
            ``"tcp://host:port"``: rank 0 listens there (rank and world_size required);
            ``"env://"``: ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE`` as torch
            sets them (and :func:`commfuse.spawn` does); ``"mpi"``: under ``mpirun``.

    Returns:
        The Communicator. Ranks on one host talk through shared memory.

    Raises:
        InvalidArgument: a malformed init_method, a missing variable, rank not in
            [0, world_size).
        RuntimeFailure: a peer did not arrive within ``COMMFUSE_TIMEOUT_S`` or failed.
    """
    if not isinstance(init_method, str):
        raise InvalidArgument(f"init: init_method must be a str, got {type(init_method).__name__}")
    if init_method.startswith("tcp://") and (rank is None or world_size is None):
        raise InvalidArgument(f"init: {init_method} needs rank and world_size")
    try:
        r = -1 if rank is None else as_int(rank, "rank", 32)
        w = -1 if world_size is None else as_int(world_size, "world_size", 32)
    except InvalidArgument as e:
        raise InvalidArgument(f"init: {e.message}") from None
    return Communicator(_commfuse.Comm(r, w, init_method))
