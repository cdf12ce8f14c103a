#include "kernels/cpu/small_m_int_gemm.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/cpu/int16_pairs.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CF_HAVE_AVX2_INT_KERNEL 1
#endif

namespace commfuse::kernels::cpu {
namespace {

// Columns per tile of a row-major b: the rows' int32 accumulators of one tile
// (kSmallIntRows x kTile x 4 bytes = 64 KiB at most) stay in L2 while b streams by.
constexpr int64_t kTile = 512;

// The portable loops. Sums are kept in uint32: an int32 sum past 2^31 (k >= 2^17) wraps
// as the int32 registers of every int8 GEMM do, instead of being undefined behaviour.
void row_major_base(const int8_t* a, int64_t rows, int64_t lda, const int8_t* b, int64_t k,
                    int64_t j0, int64_t w, int64_t ldb, uint32_t* c, int64_t ldc) {
  for (int64_t t = 0; t < k; ++t) {
    const int8_t* bt = b + t * ldb + j0;
    for (int64_t i = 0; i < rows; ++i) {
      const int32_t ai = a[i * lda + t];
      uint32_t* acc = c + i * ldc + j0;
      for (int64_t j = 0; j < w; ++j) acc[j] += static_cast<uint32_t>(ai * bt[j]);
    }
  }
}

uint32_t dot_base(const int8_t* a, const int8_t* b, int64_t k) {
  uint32_t s = 0;
  for (int64_t t = 0; t < k; ++t) s += static_cast<uint32_t>(int32_t{a[t]} * int32_t{b[t]});
  return s;
}

#ifdef CF_HAVE_AVX2_INT_KERNEL
// Two k at a time with vpmaddwd: the int16 pair (b[t, j], b[t+1, j]) times (a[t], a[t+1])
// summed into one int32 (at most 2 * 2^14: exact), eight columns per instruction, in
// column order (the bytes of b's two rows interleaved, then widened). Each b load is
// widened once and multiplied into every row's accumulators. The same sums as the base
// loop (integer arithmetic: any order gives the same bits, wrapping included).
__attribute__((target("avx2"))) void row_major_avx2(const int8_t* a, int64_t rows, int64_t lda,
                                                    const int8_t* b, int64_t k, int64_t j0,
                                                    int64_t w, int64_t ldb, uint32_t* c,
                                                    int64_t ldc) {
  // The rows' accumulators of this tile, at a stride that is no multiple of 4 KiB: c's own
  // rows (n * 4 bytes apart, 16 KiB at n = 4096) would all map to the same L1 sets.
  constexpr int64_t kStride = kTile + 16;
  alignas(32) static thread_local uint32_t tile[kSmallIntRows * kStride];
  alignas(32) __m256i pa[kSmallIntRows];
  std::fill_n(tile, rows * kStride, 0u);
  const int64_t w16 = w / 16 * 16;
  for (int64_t t = 0; t < k; t += 2) {
    const bool pair = t + 1 < k;
    const int8_t* b0 = b + t * ldb + j0;
    const int8_t* b1 = pair ? b0 + ldb : b0;  // an odd last k: paired with itself times 0
    for (int64_t i = 0; i < rows; ++i)
      pa[i] = _mm256_set1_epi32(
          static_cast<int32_t>(int16_pair(a[i * lda + t], pair ? a[i * lda + t + 1] : int8_t{0})));
    for (int64_t j = 0; j < w16; j += 16) {
      __m256i lo, hi;  // columns j..j+7, j+8..j+15
      widen_pairs_avx2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + j)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + j)), lo, hi);
      for (int64_t i = 0; i < rows; ++i) {
        auto* acc = reinterpret_cast<__m256i*>(tile + i * kStride + j);
        _mm256_store_si256(acc,
                           _mm256_add_epi32(_mm256_load_si256(acc), _mm256_madd_epi16(lo, pa[i])));
        _mm256_store_si256(
            acc + 1, _mm256_add_epi32(_mm256_load_si256(acc + 1), _mm256_madd_epi16(hi, pa[i])));
      }
    }
    for (int64_t i = 0; i < rows; ++i) {  // the last w % 16 columns
      const int32_t a0 = a[i * lda + t], a1 = pair ? a[i * lda + t + 1] : 0;
      uint32_t* acc = tile + i * kStride;
      for (int64_t j = w16; j < w; ++j)
        acc[j] += static_cast<uint32_t>(a0 * b0[j] + (pair ? a1 * b1[j] : 0));
    }
  }
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(c + i * ldc + j0, tile + i * kStride, static_cast<size_t>(w) * 4);
}

// The same sums with the accumulators in registers. b is taken in groups of 64 columns (one
// cache line of each of its rows) and blocks of kPanelPairs k pairs: each block is widened
// once into int16 pairs (the vpmaddwd operand: (b[t, j], b[t+1, j])), 32 KiB that stay in
// L1 while every block of R rows multiplies it, R x 16 columns (2R ymm sums) at a time,
// the sums carried in c across k blocks. a comes as (a[t], a[t+1]) int16 pairs, one int32
// per k pair (pairs, row stride kp).
constexpr int64_t kPanelPairs = 128;
// From this many rows the panels pay for widening b into them (AMX Xeon under
// COMMFUSE_MAX_CPU_ISA=avx2, k = n = 4096, one thread: 7 rows 3.4 against 4.2 ms, 8: 3.5
// against 4.7, 16: 6.0 against 8.4, 32: 9.0 against 20.2; 2 rows: 3.0 against 2.3, 4-6
// level), below them the sums in L2 (row_major_avx2) do.
constexpr int64_t kPanelMinRows = 7;

template <int R>
__attribute__((target("avx2"), always_inline)) inline void panel_rows_avx2(
    const __m256i* panel, int64_t strips, int64_t np, const uint32_t* pairs, int64_t kp, bool first,
    uint32_t* c, int64_t ldc) {
  for (int64_t s = 0; s < strips; ++s) {
    __m256i acc[R][2];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h)
        acc[r][h] = first ? _mm256_setzero_si256()
                          : _mm256_loadu_si256(
                                reinterpret_cast<const __m256i*>(c + r * ldc + 16 * s + 8 * h));
    const __m256i* q = panel + 2 * s;
    for (int64_t p = 0; p < np; ++p, q += 2 * strips) {
      const __m256i lo = _mm256_load_si256(q), hi = _mm256_load_si256(q + 1);
      for (int r = 0; r < R; ++r) {
        const __m256i pa = _mm256_set1_epi32(static_cast<int32_t>(pairs[r * kp + p]));
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(lo, pa));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(hi, pa));
      }
    }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 16 * s + 8 * h), acc[r][h]);
  }
}

__attribute__((target("avx2"))) void row_major_panels_avx2(const int8_t* a, int64_t rows,
                                                           int64_t lda, const int8_t* b, int64_t k,
                                                           int64_t n, int64_t ldb, uint32_t* c,
                                                           int64_t ldc) {
  const int64_t kp = (k + 1) / 2;
  thread_local std::vector<uint32_t> pairs;
  pairs.resize(static_cast<size_t>(rows * kp));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t p = 0; p < kp; ++p) {
      const int64_t t = 2 * p;
      pairs[static_cast<size_t>(i * kp + p)] =
          int16_pair(a[i * lda + t], t + 1 < k ? a[i * lda + t + 1] : int8_t{0});
    }
  alignas(32) static thread_local __m256i panel[kPanelPairs * 8];
  const int64_t n16 = n / 16 * 16;
  for (int64_t g = 0; g < n16; g += 64) {
    const int64_t strips = std::min<int64_t>(64, n16 - g) / 16;
    for (int64_t p0 = 0; p0 < kp; p0 += kPanelPairs) {
      const int64_t np = std::min(kPanelPairs, kp - p0);
      for (int64_t p = 0; p < np; ++p) {  // widen this block of b once
        const int64_t t = 2 * (p0 + p);
        const int8_t* b0 = b + t * ldb + g;
        const int8_t* b1 = t + 1 < k ? b0 + ldb : b0;  // an odd last k: its pair's a is 0
        for (int64_t s = 0; s < strips; ++s)
          widen_pairs_avx2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 16 * s)),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + 16 * s)),
                           panel[(p * strips + s) * 2], panel[(p * strips + s) * 2 + 1]);
      }
      const bool first = p0 == 0;
      int64_t i = 0;
      for (; i + 4 <= rows; i += 4)
        panel_rows_avx2<4>(panel, strips, np, pairs.data() + i * kp + p0, kp, first,
                           c + i * ldc + g, ldc);
      for (; i + 2 <= rows; i += 2)
        panel_rows_avx2<2>(panel, strips, np, pairs.data() + i * kp + p0, kp, first,
                           c + i * ldc + g, ldc);
      for (; i < rows; ++i)
        panel_rows_avx2<1>(panel, strips, np, pairs.data() + i * kp + p0, kp, first,
                           c + i * ldc + g, ldc);
    }
  }
  if (n16 < n) {  // the last n % 16 columns
    for (int64_t i = 0; i < rows; ++i) std::fill_n(c + i * ldc + n16, n - n16, 0u);
    row_major_base(a, rows, lda, b, k, n16, n - n16, ldb, c, ldc);
  }
}

// Σ_t a[t] * b[t] with vpmaddwd, sixteen k per step, the lanes added at the end.
__attribute__((target("avx2"))) uint32_t dot_avx2(const int8_t* a, const int8_t* b, int64_t k) {
  __m256i s = _mm256_setzero_si256();
  int64_t t = 0;
  for (; t + 16 <= k; t += 16) {
    const __m256i x =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + t)));
    const __m256i y =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + t)));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(x, y));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  uint32_t sum = 0;
  for (uint32_t v : lanes) sum += v;
  return sum + dot_base(a + t, b + t, k - t);
}
#endif

}  // namespace

const char* small_m_int_gemm_description() {
  static_assert(kSmallIntRows == 32, "the text below names the bound");
  return "direct int8 kernel (<= 32 rows, x2 read in place)";
}

void small_m_int_gemm(const int8_t* a, int64_t rows, int64_t lda, const int8_t* b, int64_t k,
                      int64_t n, int64_t ldb, bool b_transposed, int32_t* c, int64_t ldc) {
#ifdef CF_HAVE_AVX2_INT_KERNEL
  const bool avx2 = ::commfuse::cpu::use_avx2();
#else
  const bool avx2 = false;
#endif
  if (b_transposed) {  // c[i, j] = dot(a_i, b_j): b's row j stays in L1 across the rows
    for (int64_t j = 0; j < n; ++j) {
      const int8_t* bj = b + j * ldb;
      for (int64_t i = 0; i < rows; ++i) {
#ifdef CF_HAVE_AVX2_INT_KERNEL
        const uint32_t s = avx2 ? dot_avx2(a + i * lda, bj, k) : dot_base(a + i * lda, bj, k);
#else
        const uint32_t s = dot_base(a + i * lda, bj, k);
#endif
        c[i * ldc + j] = static_cast<int32_t>(s);
      }
    }
    return;
  }
  auto* cu = reinterpret_cast<uint32_t*>(c);  // same size and alignment; read back as int32
#ifdef CF_HAVE_AVX2_INT_KERNEL
  if (avx2 && rows >= kPanelMinRows && k > 0) {  // (k = 0: the sums are zeros, written below)
    row_major_panels_avx2(a, rows, lda, b, k, n, ldb, cu, ldc);
    return;
  }
#endif
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int64_t w = std::min(kTile, n - j0);
#ifdef CF_HAVE_AVX2_INT_KERNEL
    if (avx2) {
      row_major_avx2(a, rows, lda, b, k, j0, w, ldb, cu, ldc);
      continue;
    }
#endif
    for (int64_t i = 0; i < rows; ++i) std::fill_n(cu + i * ldc + j0, w, 0u);
    row_major_base(a, rows, lda, b, k, j0, w, ldb, cu, ldc);
  }
}

}  // namespace commfuse::kernels::cpu
