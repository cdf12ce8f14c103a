// The dequantize-and-sum kernel of quant_all_reduce / quant_reduce_scatter on a GPU (SPEC §4):
// reads every rank's quantized block in place (K-G: fp32 scale per 128 elements; MX: E8M0
// scale per 32) and writes out = Σ_r code_r · scale_r, each product one fp32 multiply, the
// sum in rank order 0..R-1 in fp32, rounded once to fp32, fp16 or bf16 — the CPU kernel's
// definition (kernels/cpu/dequant.hpp), bit for bit: no FMA contraction, the code values
// from the same exact tables, the rounding from the same encoder (core/narrow_float.hpp).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>

namespace commfuse::kernels::cuda {

inline constexpr int kMaxDequantRanks = 64;

struct DequantSumDesc {
  DType x_dtype = DType::kInt8;  // int8, hifloat8, float8_e4m3fn, float8_e5m2
  bool mx = false;               // MX (E8M0 per 32) instead of K-G (fp32 per 128)
  int ranks = 0;
  // Host arrays of `ranks` device pointers: rank r's codes and scales (row 0).
  const uint8_t* const* codes = nullptr;
  const uint8_t* const* scales = nullptr;
  int64_t rows = 0, h = 0;            // h: elements per row (a multiple of the group)
  int64_t codes_row_bytes = 0;        // stride between rows of codes (>= h)
  int64_t scales_row_bytes = 0;       // stride between rows of scales (>= h/32 bytes)
  DType out_dtype = DType::kFloat32;  // float32, float16 or bfloat16
  void* out = nullptr;                // device, rows x h, dense
};

// Launches on `stream` (a cudaStream_t; null = the default stream). Throws PARAM_INVALID
// naming the argument for a bad descriptor, RUNTIME_ERROR for a CUDA failure (or no device).
void dequant_sum(const DequantSumDesc& d, void* stream);

}  // namespace commfuse::kernels::cuda
