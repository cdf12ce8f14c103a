"""commfuse: fused communication + computation operators, Python API.

The operators have torch_npu's names and argument order (``all_gather_base_mm``,
``mm_reduce_scatter_base``, ``mm_all_reduce_base``), or CANN's (``alltoall_quant_matmul``,
``alltoall_matmul``, ``quant_all_reduce``, ``quant_reduce_scatter``; ``quantize`` /
``dequantize`` make their inputs) and run in libcommfuse (C++) on the caller's arrays
without copies where the layout allows::

    import numpy as np, commfuse

    def worker(rank):
        with commfuse.init() as comm:             # env:// set up by spawn
            x1 = np.full((16, 32), rank, np.float16)
            w = np.ones((32, 8), np.float16)
            output, gather_out = commfuse.all_gather_base_mm(x1, w, comm.name, comm.world_size)

    if __name__ == "__main__":
        commfuse.spawn(worker, nprocs=4)

Pieces: :func:`spawn` (local processes, like torch.multiprocessing.spawn), :func:`init`
(a :class:`Communicator`: ``name`` is the ``hcom`` string; barrier, all_gather, all_reduce,
reduce_scatter, all_to_all, broadcast), the operators, :func:`convert` / :func:`pack_int4`
/ :func:`unpack_int4` (SPEC §1), and :class:`Error` with one subclass per SPEC §0 status.

Arrays: numpy (ml_dtypes for the formats numpy lacks) or any CPU DLPack tensor (torch).
Every operator also takes CUDA tensors (torch, or DLPack arrays on a CUDA device): every
rank's tensors on its current device (``torch.cuda.set_device``; CUDA IPC between ranks on
one host, NCCL across hosts); the op runs on that GPU, queued on torch's current stream of
the device (other DLPack arrays: the legacy default stream, and their results passed with
``out=``), and returns once queued; torch results are allocated on the device. Not on
devices: quantize / dequantize and the collectives.

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
int4               ml_dtypes.int4              one value per byte (see pack_int4);
                                               alltoall_quant_matmul packs such arrays
                                               itself; ops and collectives also take
                                               int4 packed in uint8 with dtype="int4"
int8/int32/int64   numpy.int8/int32/int64
uint8/int16/       numpy.uint8/int16/uint16/   data movement only: all_gather,
uint16/bool        bool_                       all_to_all, broadcast (no sums, convert
                                               or operators)
=================  ==========================  ======================================
"""

from __future__ import annotations

from . import _commfuse
from ._comm import Communicator, init
from ._convert import convert, pack_int4, unpack_int4
from ._errors import Error, InternalError, InvalidArgument, NullPointerError, RuntimeFailure
from ._packed import PackedWeight
from ._spawn import (ProcessExitedException, ProcessRaisedException, SpawnContext, SpawnError,
                     free_port, spawn)
from .ops import (all_gather_base_mm, alltoall_matmul, alltoall_quant_matmul, dequantize,
                  mm_all_reduce_base, mm_reduce_scatter_base, quant_all_reduce,
                  quant_reduce_scatter, quantize)

__all__ = [
    "__version__",
    # processes and communicators
    "spawn",
    "SpawnContext",
    "SpawnError",
    "ProcessRaisedException",
    "ProcessExitedException",
    "free_port",
    "init",
    "Communicator",
    # operators (SPEC §2)
    "all_gather_base_mm",
    "mm_reduce_scatter_base",
    "mm_all_reduce_base",
    "PackedWeight",  # their x2 packed once ahead (packed_x2=)
    # operators (SPEC §3)
    "alltoall_quant_matmul",
    "alltoall_matmul",
    # operators (SPEC §4) and quantize helpers (SPEC §5)
    "quant_all_reduce",
    "quant_reduce_scatter",
    "quantize",
    "dequantize",
    # number formats (SPEC §1)
    "convert",
    "pack_int4",
    "unpack_int4",
    # errors (SPEC §0)
    "Error",
    "NullPointerError",
    "InvalidArgument",
    "RuntimeFailure",
    "InternalError",
]

# Public classes print as commfuse.X (not commfuse._errors.X) in tracebacks and reprs.
for _cls in (Communicator, SpawnContext, SpawnError, ProcessRaisedException,
             ProcessExitedException, Error, NullPointerError, InvalidArgument, RuntimeFailure,
             InternalError, PackedWeight):
    _cls.__module__ = __name__
del _cls

#: Version of the loaded libcommfuse ("0.1.0").
__version__: str = _commfuse.version()
