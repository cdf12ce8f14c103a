// 8-bit codes widened to bf16 on the GPU, for GEMMs cuBLASLt has no kernel for: SPEC §6's
// HiF8 matmuls. Every code of hifloat8 (at most 4 significant bits, exponents in [-22, 15]),
// float8_e4m3fn, float8_e5m2 and int8 is a bf16 value exactly, so a bf16 GEMM with fp32
// accumulation forms the same exact products (SPEC §6: "a CPU may widen the codes to bf16");
// the table is core/code_values' (the CPU's decoders), each entry rounded to bf16 (exact).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>

namespace commfuse::kernels::cuda {

struct DecodeBf16Desc {
  DType code_dtype = DType::kHiFloat8;  // hifloat8, float8_e4m3fn, float8_e5m2 or int8
  int64_t rows = 0, cols = 0;
  const void* src = nullptr;  // device, rows x cols codes, row stride ld_src
  int64_t ld_src = 0;
  uint16_t* dst = nullptr;  // device, rows x cols bf16, row stride ld_dst
  int64_t ld_dst = 0;
};

// Launches on `stream` (cudaStream_t). Throws PARAM_INVALID naming the argument, or
// RUNTIME_ERROR for a CUDA failure or no device.
void decode_to_bf16(const DecodeBf16Desc& d, void* stream);

}  // namespace commfuse::kernels::cuda
