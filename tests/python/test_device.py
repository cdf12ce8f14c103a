"""CUDA arrays through Python (issue 17), what a machine without a GPU can check: an array
whose DLPack export says CUDA device 0 reaches the C++ operators labeled cuda:0 (a label the
CPU path would have ignored, running on the memory behind it, which here is host memory),
and the answer is the one this build can give: "no usable CUDA device" (RuntimeFailure) in a
CUDA build without a GPU, "built without CUDA" (InvalidArgument) otherwise (the matmul ops
the quantized reductions and alltoall_matmul alike); the collectives and quantize, which the
CUDA backend does not run, reject it as not supported; the communicator stays usable after each."""

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


# What the three matmul ops answer cuda:0 tensors, by build: each build has one answer.
_ANSWERS = {"no usable CUDA device": commfuse.RuntimeFailure,  # CUDA build, no GPU here
            "built without CUDA": commfuse.InvalidArgument}


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

        try:
            commfuse.mm_all_reduce_base(CudaLabeled(x), CudaLabeled(w), comm.name,
                                        out=CudaLabeled(np.empty((2, 4), F32)))
            raise AssertionError("cuda:0 tensors were accepted")
        except commfuse.Error as e:
            answer = [a for a in _ANSWERS if a in e.message]
            assert len(answer) == 1 and type(e) is _ANSWERS[answer[0]], e.message
            answer = answer[0]
        expect(_ANSWERS[answer], answer, lambda: commfuse.all_gather_base_mm(
            CudaLabeled(x), CudaLabeled(w), comm.name, R,
            out=CudaLabeled(np.empty((2 * R, 4), F32)),
            gather_out=CudaLabeled(np.empty((2 * R, 8), F32))))
        expect(_ANSWERS[answer], answer, lambda: commfuse.mm_reduce_scatter_base(
            CudaLabeled(np.ones((2 * R, 8), F32)), CudaLabeled(w), comm.name, R,
            out=CudaLabeled(np.empty((2, 4), F32))))
        expect(commfuse.InvalidArgument, "x2 is on cuda:0 but x1 is on cpu",
               lambda: commfuse.all_gather_base_mm(x, CudaLabeled(w), comm.name, R))
        expect(commfuse.InvalidArgument, "src is on cuda:0: not supported",
               lambda: comm.all_gather(CudaLabeled(x), np.empty((2 * R, 8), F32)))
        expect(commfuse.InvalidArgument, "scales is on cuda:0 but x is on cpu",
               lambda: commfuse.quant_all_reduce(
                   np.zeros((2, 128), np.int8), CudaLabeled(np.ones((2, 1), F32)), comm.name))
        expect(_ANSWERS[answer], answer, lambda: commfuse.quant_all_reduce(
            CudaLabeled(np.zeros((2, 128), np.int8)), CudaLabeled(np.ones((2, 1), F32)),
            comm.name, out=CudaLabeled(np.empty((2, 128), F32))))
        expect(_ANSWERS[answer], answer, lambda: commfuse.alltoall_matmul(
            CudaLabeled(np.ones((R, 8), F32)), CudaLabeled(np.ones((8 * R, 4), F32)), comm.name,
            R, out=CudaLabeled(np.empty((1, 4), F32))))
        expect(commfuse.InvalidArgument, "x is on cuda:0: not supported", lambda: commfuse.quantize(
            CudaLabeled(np.ones((2, 128), F32)), np.int8, "per_token_group"))
        return answer, seen


def test_cuda_labeled_arrays_reach_the_ops_and_leave_the_group_usable():
    results = run(_body, 2)
    assert results[0][0] == results[1][0]  # one build, one answer
    for _, seen in results:
        assert seen == [8.0 * (1 + 2)] * 8  # the host op after each rejection: both ranks' rows
