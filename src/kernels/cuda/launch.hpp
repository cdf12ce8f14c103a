// What every CUDA kernel's host side does around its launch: argument alignment checks (a
// misaligned device access poisons the whole process's CUDA context, so it is rejected
// before launch) and the launch's own error, reported as RUNTIME_ERROR naming the kernel.
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

// After a launch: throws RUNTIME_ERROR "<fn>: launch failed: ..." if it did not start.
inline void check_launch(const char* fn) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    detail::throw_status(Status::kRuntimeError,
                         detail::cat(fn, ": launch failed: ", cudaGetErrorString(err)));
}

}  // namespace commfuse::kernels::cuda
