// Dequantization kernels of the quantized reductions and helpers (SPEC §4, §5): 8-bit
// codes times their group's scale in fp32, accumulated in rank order, rounded once.
// Scales: K-G = one fp32 per 128 elements; MX = one E8M0 byte per 32 elements.
#pragma once

#include <commfuse/commfuse.hpp>

#include "core/code_values.hpp"

#include <cstddef>
#include <cstdint>

namespace commfuse::kernels::cpu {

enum class ScaleKind { kGroup128, kMx32 };

inline constexpr int64_t kKgGroup = 128;
inline constexpr int64_t kMxGroup = 32;

// Elements per scale.
inline int64_t scale_group(ScaleKind k) {
  return k == ScaleKind::kGroup128 ? kKgGroup : kMxGroup;
}
// Bytes of one row's scales (H a multiple of the group): K-G 4·H/128, MX H/32 — both H/32.
inline int64_t scale_row_bytes(ScaleKind k, int64_t h) {
  return k == ScaleKind::kGroup128 ? h / kKgGroup * 4 : h / kMxGroup;
}

// code_values (core/code_values.hpp): the exact table of each 8-bit format's codes.
using ::commfuse::code_values;

// One row of H codes with its scales (K-G: H/128 floats, unaligned allowed; MX: H/32 E8M0
// bytes in the (H/64, 2) row-major order, which is simply group order).
// first: acc = dequant(row); otherwise acc += dequant(row). The product code·scale is one
// fp32 multiply, then one fp32 add, so summing rows of ranks 0..R-1 in order gives SPEC §4's
// rank-order fp32 sum bit for bit.
void dequant_accumulate_row(DType x_dtype, ScaleKind kind, const uint8_t* codes,
                            const uint8_t* scales, int64_t h, float* acc, bool first);

// SPEC §6's epilogue of one output row of a quantized matmul, the scales' product first in
// fp32: y[j] = f32(acc[j]) * (sa * b_scale[j]) (+ bias32[j] when non-null). acc is the
// exact int32 product (A8W8) ...
void scale_int_row(const int32_t* acc, float sa, const float* b_scale, const float* bias32,
                   float* y, size_t n);
// ... or the fp32 product of decoded FP8/HiF8 codes.
void scale_f32_row(const float* acc, float sa, const float* b_scale, const float* bias32, float* y,
                   size_t n);

// dst (count elements of out_dtype: float32, float16 or bfloat16) = acc rounded once (RNE).
void store_f32_as(const float* acc, void* dst, DType out_dtype, size_t count);

}  // namespace commfuse::kernels::cpu
