// SPEC §6's epilogue of a quantized matmul on the GPU, as the CPU's scale_int_row /
// scale_f32_row + store_f32_as define it, bit for bit: y = f32(acc) * (sa * sb[j]), the
// scales' product first; an int32 bias joins the exact int32 sum (in int64), a float bias
// is added to the fp32 product as a separate rounding; then one rounding to the output dtype.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>

namespace commfuse::kernels::cuda {

struct EpilogueDesc {
  int64_t m = 0, n = 0;
  DType acc_dtype = DType::kInt32;  // int32 (A8W8) or float32 (FP8/HiF8 decoded)
  const void* acc = nullptr;        // device, m x n, row stride ld_acc elements
  int64_t ld_acc = 0;
  const float* a_scale = nullptr;  // device: one per row (a_per_row) or one in all
  bool a_per_row = false;
  const float* b_scale = nullptr;  // device: one per column (b_per_column) or one in all
  bool b_per_column = false;
  const void* bias32 = nullptr;          // device, n float values, or null
  DType bias32_dtype = DType::kFloat32;  // float32, float16 or bfloat16 (widened exactly)
  const int32_t* bias_int = nullptr;     // device, n values, or null (int32 accumulators only)
  DType out_dtype = DType::kBFloat16;    // float32, float16 or bfloat16
  void* out = nullptr;                   // device, m x n, row stride ld_out elements
  int64_t ld_out = 0;
};

// Launches on `stream` (a cudaStream_t). Throws PARAM_INVALID naming the argument, or
// RUNTIME_ERROR for a CUDA failure or no device.
void quant_epilogue(const EpilogueDesc& d, void* stream);

// alltoall_quant_matmul's A16W8 / A16W4 epilogue (SPEC §3), as the CPU's dequant_row
// (ops/alltoall_quant_matmul/row_kernels.cpp) computes it, bit for bit: y = (f32(acc) *
// x2_scale[j]) * s[i] + bias[j], each step one fp32 rounding, the bias widened exactly, then
// one rounding to the output dtype.
// A4W4 (segments > 0): one int32 product per source rank s, each with its own token scale,
// as the CPU's dequant_segment + add_bias: y = Σ_s (f32(acc_s) * s[i, s]) * x2_scale[j] in
// rank order (the first term assigned, not added to 0), + bias[j], then one rounding.
struct TokenEpilogueDesc {
  int64_t m = 0, n = 0;
  int segments = 0;                    // A4W4: the source ranks; 0: A16W8 / A16W4
  const int32_t* acc = nullptr;        // device, m x n dense (A4W4: `segments` such blocks)
  const float* token_scale = nullptr;  // device, m (s[i]; A4W4: m x segments, dense)
  const float* x2_scale = nullptr;     // device, n
  const void* bias = nullptr;          // device, n values, or null
  DType bias_dtype = DType::kFloat32;  // float32, float16 or bfloat16
  DType out_dtype = DType::kBFloat16;  // float32, float16 or bfloat16
  void* out = nullptr;                 // device, m x n dense
};
void token_epilogue(const TokenEpilogueDesc& d, void* stream);

}  // namespace commfuse::kernels::cuda
