// An exact int8 x int8 -> int32 GEMM for AVX2 CPUs without VNNI (int_matmul.hpp's kMadd16).
// There oneDNN's s8 kernel multiplies with vpmaddubsw, whose int16 pair sums saturate for
// int8 weights, so A16W8 / A8W8 ran oneDNN's fp32 GEMM on widened values instead (exact
// in k-blocks, at fp32 speed). vpmaddwd multiplies int16 pairs into int32 without
// saturation: sixteen multiply-adds per instruction where an fp32 FMA does eight. One
// thread on the AMX Xeon held to AVX2, 384x4096x4096: 76-80 GMAC/s against the fp32 path's
// 57 (a 4-row x 16-column register tile; 6 rows spilled the accumulators).
//
// b is packed once per call (or in a PackedWeight) into panels of 16 columns: for each pair
// of k, the 16 columns' (b[2t, j], b[2t + 1, j]) as int16 (an odd last k paired with 0),
// padded to whole panels with zeros. Exact for any int8 operands while k < 2^17 (each
// product is at most 2^14; beyond, the int32 sums wrap as every int32-accumulating int8
// GEMM's do).
#pragma once

#include <cstddef>
#include <cstdint>

namespace commfuse::kernels::cpu {

// Whether this build and CPU (capped by COMMFUSE_MAX_CPU_ISA) run the AVX2 kernel.
bool madd16_available();

// Bytes of b packed for k x n (whole panels of 16 columns, k rounded up to even).
size_t madd16_packed_b_bytes(int64_t k, int64_t n);

// b (k, n) row-major with row stride ldb, or, when b_transposed, an (n, k) buffer with row
// stride ldb, into the panel layout above.
void madd16_pack_b(const int8_t* b, int64_t k, int64_t n, int64_t ldb, bool b_transposed,
                   void* packed);

// c (m x n, row stride ldc) = a (m x k, row stride lda) @ b (packed by madd16_pack_b for
// the same k and n), with up to `threads` threads over column panels. Needs
// madd16_available().
void madd16_gemm(const int8_t* a, int64_t m, int64_t k, int64_t n, int64_t lda, const void* packed,
                 int32_t* c, int64_t ldc, int threads);

}  // namespace commfuse::kernels::cpu
