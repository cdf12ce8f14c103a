// The end of matmul_reduce_scatter / matmul_all_reduce on the GPU, as the CPU's
// sum_bias_round (ops/common/epilogue.hpp) defines it, bit for bit: out = round(((p_0 + p_1)
// + ... + p_{R-1}) + bias), every add one fp32 IEEE rounding in rank order, the bias widened
// exactly to fp32, one rounding (RNE) to the output dtype. With one part it is
// all_gather_matmul's bias epilogue (round(p_0 + bias)).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>

namespace commfuse::kernels::cuda {

inline constexpr int kMaxSumParts = 64;

struct SumRowsDesc {
  int parts = 0;                       // 1..kMaxSumParts
  const float* const* part = nullptr;  // host array of `parts` device pointers (rows x n)
  int64_t ld_part = 0;                 // row stride of every part, in elements
  int64_t rows = 0, n = 0;
  const void* bias = nullptr;          // device, n values, or null
  DType bias_dtype = DType::kFloat32;  // float32, float16 or bfloat16
  DType out_dtype = DType::kFloat32;   // float32, float16 or bfloat16
  void* out = nullptr;                 // device, rows x n; must not alias a part
  int64_t ld_out = 0;
};

// Launches on `stream` (a cudaStream_t). Throws PARAM_INVALID naming the argument, or
// RUNTIME_ERROR for a CUDA failure or no device.
void sum_bias_round(const SumRowsDesc& d, void* stream);

// dst[0, count) = src[0] (device pointers): a per-tensor scale expanded to one per row.
void broadcast_f32(const float* src, int64_t count, float* dst, void* stream);

}  // namespace commfuse::kernels::cuda
