// alltoall_quant_matmul's fused permute + dynamic per-token quantization on the GPU (SPEC §3,
// x1QuantMode 7): permuted row i of this rank is the concatenation over source ranks s of
// row i of rank s's block for this rank, read in place; each row is widened to fp32, times
// the optional smooth scale (one fp32 multiply), its amax taken (NaNs skipped), and
// quantized q = clamp(rint(v * (Q / amax)), -Q, Q) (NaN -> 0) with s = amax / Q — the CPU
// kernels' arithmetic (kernels/cpu/quant_per_token.hpp), so codes and scales match them bit
// for bit. Q = 127 (A16W8) or 7 (A16W4: int4 values held in int8).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>

namespace commfuse::kernels::cuda {

inline constexpr int kMaxPermuteRanks = 64;

struct PermuteQuantDesc {
  DType x_dtype = DType::kBFloat16;  // float16 or bfloat16
  int ranks = 0;
  // Host array of `ranks` device pointers: row 0 of the block rank s sends to this rank.
  const void* const* src = nullptr;
  int64_t src_row_stride = 0;    // elements between rows of a source block (>= h)
  int64_t rows = 0, h = 0;       // permuted rows (BS/R) and elements per source segment
  const void* smooth = nullptr;  // device, R*h values of x_dtype, or null
  int qmax = 127;                // 127 or 7
  int8_t* q = nullptr;           // device, rows x (R*h), dense
  float* scales = nullptr;       // device, rows
  void* permuted = nullptr;      // device, rows x (R*h) of x_dtype (alltoAllOut), or null
};

// Launches on `stream` (cudaStream_t). Throws PARAM_INVALID naming the argument, or
// RUNTIME_ERROR for a CUDA failure or no device.
void permute_quant(const PermuteQuantDesc& d, void* stream);

// A4W4 (x1QuantMode 3, SPEC §3): x1 is int4 with a static per-token scale that travels with
// its row. Permuted row i is the concatenation over source ranks s of row i of rank s's
// block for this rank (h int4 values, h/2 bytes), widened to int8 for the GEMM, and
// scales[i * ranks + s] is rank s's scale of that row (the CPU's layout: one GEMM per
// segment, each with its own token scale); `permuted` (alltoAllOut) gets the packed bytes.
struct PermuteInt4Desc {
  int ranks = 0;
  const void* const* src = nullptr;          // host array of device pointers, as above (packed)
  const float* const* src_scales = nullptr;  // host array: each block's row scales (rows)
  int64_t rows = 0, h = 0;                   // h even
  int8_t* q = nullptr;                       // device, rows x (ranks*h), dense
  float* scales = nullptr;                   // device, rows x ranks, dense
  void* permuted = nullptr;                  // device, rows x (ranks*h/2) bytes, or null
};
void permute_int4(const PermuteInt4Desc& d, void* stream);

}  // namespace commfuse::kernels::cuda
