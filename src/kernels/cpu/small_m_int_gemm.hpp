// A direct exact int8 GEMM for few rows (decode: a few tokens per rank against a large
// int8 weight): b is read in place, int32 accumulation. The general paths either need
// VNNI/AMX (oneDNN's s8 kernel) or widen all of b to fp32 first (kF32Blocked: k·n·4 bytes
// written, then streamed by k-blocked fp32 GEMMs), which for a few rows costs several times
// the multiply-adds themselves. Here each b element is loaded once per call: with few rows
// multiplied into every row's int32 sums, kept in an L2 tile; from 7 rows (AVX2) widened
// once per block into int16 pairs in L1, which register tiles of 4, 2 and 1 rows multiply.
//
// Exact for any int8 operands while k < 2^17 (every product is at most 2^14 in magnitude,
// the sums are int32; beyond, they wrap as any int32-accumulating int8 GEMM's do). The AVX2
// and baseline copies compute the same bits.
#pragma once

#include <cstdint>

namespace commfuse::kernels::cpu {

// Rows up to which the quantized matmul ops (ops/common/quant_row_gemm) and
// alltoall_quant_matmul A16W8 (its rows per rank) use this kernel where oneDNN's s8 kernel
// saturates.
inline constexpr int64_t kSmallIntRows = 32;

// "direct int8 kernel (<= 32 rows, x2 read in place)": how plan descriptions name it.
const char* small_m_int_gemm_description();

// c (rows x n, row stride ldc) = a (rows x k, row stride lda) @ b, b (k, n) row-major with
// row stride ldb, or, when b_transposed, an (n, k) buffer with row stride ldb.
void small_m_int_gemm(const int8_t* a, int64_t rows, int64_t lda, const int8_t* b, int64_t k,
                      int64_t n, int64_t ldb, bool b_transposed, int32_t* c, int64_t ldc);

}  // namespace commfuse::kernels::cpu
