// What every CUDA kernel's host side does around its launch: argument alignment checks (a
// misaligned device access poisons the whole process's CUDA context, so it is rejected
// before launch) and the launch's own error, reported as RUNTIME_ERROR naming the kernel;
// and the CUDA-call check the backend's host code (heap, device context, schedules) shares.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"

namespace commfuse::kernels::cuda {

// p is a multiple of a (null counts as aligned: optional operands).
inline bool aligned(const void* p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

// Unless e is cudaSuccess: clears CUDA's last error (a failed call must not poison the next
// one's check) and throws RUNTIME_ERROR "<who...>: <what> failed: <CUDA's words>". `who`
// is formatted only on failure (this runs on every queued call).
template <typename... Who>
void check_cuda(cudaError_t e, const char* what, const Who&... who) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  detail::throw_status(Status::kRuntimeError,
                       detail::cat(who..., ": ", what, " failed: ", cudaGetErrorString(e)));
}

// After a launch: throws RUNTIME_ERROR "<fn>: launch failed: ..." if it did not start.
inline void check_launch(const char* fn) {
  check_cuda(cudaGetLastError(), "launch", fn);
}

// The dtypes the float kernels read and write: float32, float16, bfloat16.
inline bool float_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

}  // namespace commfuse::kernels::cuda
