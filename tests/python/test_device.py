"""CUDA arrays through Python (issue 17), what a machine without a GPU can check: an array
whose DLPack export says CUDA device 0 reaches the C++ operators labeled cuda:0 (a label the
CPU path would have ignored, running on the memory behind it, which here is host memory),
and the answer is the one this build and machine give, the same for every op of a family
(the matmul and alltoall ops; the quantized reductions); a CUDA array that is not a torch
tensor needs its results passed in; the collectives and dequantize reject it as not
supported (dequantize); the communicator stays usable after each."""

import ctypes

import numpy as np
import pytest

import commfuse
from ranks import run

F32 = np.float32
_KDL_CUDA = 2  # DLPack's kDLCUDA

ctypes.pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
ctypes.pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class CudaLabeled:
    """A numpy array exported through DLPack with its device rewritten to cuda:0 (DLTensor:
    data pointer, then DLDevice {int32 type, int32 id})."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return (_KDL_CUDA, 0)

    def __dlpack__(self, **kwargs):
        capsule = self.a.__dlpack__()
        managed = ctypes.pythonapi.PyCapsule_GetPointer(capsule, b"dltensor")
        device = ctypes.cast(managed + ctypes.sizeof(ctypes.c_void_p),
                             ctypes.POINTER(ctypes.c_int32))
        device[0], device[1] = _KDL_CUDA, 0
        return capsule


# What the operators answer cuda:0 tensors over host memory, by build and machine: each
# build has one answer per op family (the matmul ops need cuBLASLt, quant_all_reduce not).
_ANSWERS = {"built without CUDA": commfuse.InvalidArgument,
            "no usable CUDA device": commfuse.RuntimeFailure,  # a CUDA build, no GPU
            "cuBLASLt cannot be used": commfuse.RuntimeFailure,  # a GPU, no libcublasLt
            "its memory is host memory": commfuse.InvalidArgument}  # a GPU: the pointer check


def _answer(fn):
    """The one key of _ANSWERS fn's error names, checked against the error's class."""
    try:
        fn()
    except commfuse.Error as e:
        keys = [k for k in _ANSWERS if k in e.message]
        assert len(keys) == 1 and type(e) is _ANSWERS[keys[0]], e.message
        return keys[0]
    raise AssertionError("cuda:0 tensors were accepted")


def _body(rank):
    with commfuse.init() as comm:
        R = comm.world_size
        x, w = np.ones((2, 8), F32), np.ones((8, 4), F32)
        seen = []

        def expect(cls, pattern, fn):
            with pytest.raises(cls, match=pattern):
                fn()
            out = commfuse.mm_all_reduce_base(x * (rank + 1), w, comm.name)  # still usable
            seen.append(float(out[0, 0]))

        mm = _answer(lambda: commfuse.mm_all_reduce_base(
            CudaLabeled(x), CudaLabeled(w), comm.name, out=CudaLabeled(np.empty((2, 4), F32))))
        quant = _answer(lambda: commfuse.quant_all_reduce(
            CudaLabeled(np.zeros((2, 128), np.int8)), CudaLabeled(np.ones((2, 1), F32)),
            comm.name, out=CudaLabeled(np.empty((2, 128), F32))))
        expect(_ANSWERS[mm], mm, lambda: commfuse.all_gather_base_mm(
            CudaLabeled(x), CudaLabeled(w), comm.name, R,
            out=CudaLabeled(np.empty((2 * R, 4), F32)),
            gather_out=CudaLabeled(np.empty((2 * R, 8), F32))))
        expect(_ANSWERS[mm], mm, lambda: commfuse.mm_reduce_scatter_base(
            CudaLabeled(np.ones((2 * R, 8), F32)), CudaLabeled(w), comm.name, R,
            out=CudaLabeled(np.empty((2, 4), F32))))
        expect(_ANSWERS[mm], mm, lambda: commfuse.alltoall_matmul(
            CudaLabeled(np.ones((R, 8), F32)), CudaLabeled(np.ones((8 * R, 4), F32)), comm.name,
            R, out=CudaLabeled(np.empty((1, 4), F32))))
        expect(_ANSWERS[quant], quant, lambda: commfuse.quant_reduce_scatter(
            CudaLabeled(np.zeros((2 * R, 128), np.int8)), CudaLabeled(np.ones((2 * R, 1), F32)),
            comm.name, out=CudaLabeled(np.empty((2, 128), F32))))
        expect(commfuse.InvalidArgument, "x2 is on cuda:0 but x1 is on cpu",
               lambda: commfuse.all_gather_base_mm(x, CudaLabeled(w), comm.name, R))
        expect(commfuse.InvalidArgument, "scales is on cuda:0 but x is on cpu",
               lambda: commfuse.quant_all_reduce(
                   np.zeros((2, 128), np.int8), CudaLabeled(np.ones((2, 1), F32)), comm.name))
        expect(commfuse.InvalidArgument, "pass its results' arrays",  # no torch to allocate
               lambda: commfuse.mm_all_reduce_base(CudaLabeled(x), CudaLabeled(w), comm.name))
        expect(commfuse.InvalidArgument, "x is on cuda:0: not supported",
               lambda: comm.all_gather(CudaLabeled(x), np.empty((2 * R, 8), F32)))
        expect(commfuse.InvalidArgument, "q is on cuda:0: not supported",
               lambda: commfuse.dequantize(CudaLabeled(np.zeros((2, 128), np.int8)),
                                           np.ones((2, 1), F32), "per_token_group",
                                           out=np.empty((2, 128), F32)))
        return (mm, quant), seen


def test_cuda_labeled_arrays_reach_the_ops_and_leave_the_group_usable():
    results = run(_body, 2)
    assert results[0][0] == results[1][0]  # one build, one answer
    for _, seen in results:
        assert seen == [8.0 * (1 + 2)] * 9  # the host op after each rejection: both ranks' rows
