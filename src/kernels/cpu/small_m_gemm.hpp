// A direct GEMM for few rows with 16-bit (fp16/bf16) operands on CPUs where oneDNN has no
// native kernel for them: b is read in place and widened 128 columns at a time into a
// small buffer, instead of being widened whole into fp32 scratch (k·n·4 bytes written, then
// read again by the fp32 GEMM) on every call. With m rows that whole-matrix widening costs
// about as much as the m·k·n multiply-adds themselves once m is below a few dozen: decode
// (a few tokens per rank against a 4096 x 4096 weight) is that case.
//
// Arithmetic: fp32 products and sums, each c element summed in a fixed order (k ascending
// for a row-major b; eight interleaved partial sums, then added in lane order, for a
// transposed b), the bias added once, one rounding to c's dtype (SPEC §0). The AVX2 and
// baseline copies of the loops compute the same bits.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul.hpp"

namespace commfuse::kernels::cpu {

// Rows up to which plan_matmul uses this kernel instead of widening 16-bit operands for
// oneDNN's fp32 GEMM (break-even measured near 2·16 rows on AVX2 without FMA in the loop).
inline constexpr int64_t kSmallMRows = 32;
// Columns of b per tile: the unit the kernel's compute threads split (small_m_gemm.cpp).
inline constexpr int64_t kSmallMColumnTile = 128;

// Whether desc is one this kernel runs: 16-bit a and b, 1 <= m <= kSmallMRows, no
// accumulate. (The caller decides whether to prefer it: only without a native kernel.)
bool small_m_gemm_applies(const MatmulDesc& desc);

// c = a @ b (+ bias32, n floats, or null), with desc's strides and dtypes; threads > 1
// splits the columns.
void small_m_gemm(const MatmulDesc& desc, const void* a, const void* b, const float* bias32,
                  void* c, int threads);

}  // namespace commfuse::kernels::cpu
