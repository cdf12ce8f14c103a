// The small steps the device schedules (device_schedules.cpp, device_alltoall.cpp) share:
// a CUDA call's error as RUNTIME_ERROR naming the rank, a device copy on a stream, scratch
// carved into aligned pieces, and the float ops' bias epilogue.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ops/cuda/device_context.hpp"

namespace commfuse::ops::cuda {

// Throws RUNTIME_ERROR "CUDA schedule (rank r): <what> failed: ..." unless e is cudaSuccess.
void check(cudaError_t e, int rank, const char* what);
// bytes from src to dst (device memory), queued on `stream`.
void copy(void* dst, const void* src, size_t bytes, void* stream, int rank);

// Scratch, 256-byte aligned pieces, in order of `take`.
class ScratchPieces {
 public:
  size_t take(size_t bytes) {
    const size_t at = total_;
    total_ += heap_align(bytes);
    return at;
  }
  size_t total() const { return std::max<size_t>(total_, 4); }

 private:
  size_t total_ = 0;
};

// out (rows x n, dense) = round(acc + bias): the float ops' bias epilogue after a GEMM into
// fp32 (SPEC §0: one rounding), kernels/cuda/sum_rows' sum_bias_round over one part.
void add_bias_round(const float* acc, int64_t rows, int64_t n, const void* bias, DType bias_dtype,
                    DType out_dtype, void* out, void* stream);

}  // namespace commfuse::ops::cuda
