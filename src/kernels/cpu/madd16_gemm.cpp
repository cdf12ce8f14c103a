#include "kernels/cpu/madd16_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/int16_pairs.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CF_HAVE_MADD16 1
#endif

namespace commfuse::kernels::cpu {
namespace {

// Register tile: kRows rows x 16 columns in 8 int32 accumulators, plus the two b vectors,
// the broadcast a pair and the products: 6 rows (12 accumulators) spilled to the stack.
constexpr int64_t kRows = 4;
constexpr int64_t kPanel = 16;      // columns per panel of packed b
constexpr int64_t kPairBytes = 64;  // one pair of k of a panel: 16 columns x 2 x int16
// Cache blocking: a panel's kKPairs pairs (16 KiB) stay in L1 while every row group of a
// row block passes by; a's packed block (kBlockRows x kKPairs x 4 bytes, 64 KiB) and a
// column block's panels (half of L2) stay in L2. (One
// thread, AMX Xeon capped to AVX2, 384x4096x4096: 256 pairs 76-77 GMAC/s, 128 pairs 70,
// 512 pairs 78 with a 4x larger a block.)
constexpr int64_t kKPairs = 256;
constexpr int64_t kBlockRows = 64;

int64_t pairs(int64_t k) {
  return (k + 1) / 2;
}

int64_t panels(int64_t n) {
  return (n + kPanel - 1) / kPanel;
}

// b[kk, j] for either layout, 0 outside k x n (the padding).
int16_t b_at(const int8_t* b, int64_t k, int64_t n, int64_t ldb, bool bt, int64_t kk, int64_t j) {
  if (kk >= k || j >= n) return 0;
  return bt ? b[j * ldb + kk] : b[kk * ldb + j];
}

// a's rows [i0, i0 + rows) and pairs [t0, t0 + kc) as (a[2t], a[2t + 1]) int16 pairs in one
// int32 each, grouped by kRows rows: out[(g * kc + t) * kRows + r]; missing rows are 0.
void pack_a(const int8_t* a, int64_t k, int64_t lda, int64_t i0, int64_t rows, int64_t t0,
            int64_t kc, uint32_t* out) {
  const int64_t groups = (rows + kRows - 1) / kRows;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < kRows; ++r) {
      uint32_t* o = out + g * kc * kRows + r;
      const int64_t i = g * kRows + r;
      if (i >= rows) {
        for (int64_t t = 0; t < kc; ++t) o[t * kRows] = 0;
        continue;
      }
      const int8_t* row = a + (i0 + i) * lda;
      for (int64_t t = 0; t < kc; ++t) {
        const int64_t kk = 2 * (t0 + t);
        o[t * kRows] = int16_pair(row[kk], kk + 1 < k ? row[kk + 1] : int8_t{0});
      }
    }
}

// Stores a tile's sums (tile: kRows x kPanel, written by the kernel) into c's rows x cols
// corner, adding to what is there when accumulate. uint32: the sums wrap as int32's would.
void store_partial(const uint32_t* tile, int64_t rows, int64_t cols, int32_t* c, int64_t ldc,
                   bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    auto* cr = reinterpret_cast<uint32_t*>(c + r * ldc);
    for (int64_t j = 0; j < cols; ++j) cr[j] = (accumulate ? cr[j] : 0u) + tile[r * kPanel + j];
  }
}

#ifdef CF_HAVE_MADD16
// c[0..4) x [0..16) (=|+=) Σ_t a_pair[t] · b_pair[t]: per pair of k two b vectors (eight
// columns' pairs each) and four broadcast a pairs, eight vpmaddwd + vpaddd. Integer sums:
// any order gives the same bits.
__attribute__((target("avx2"))) void tile_4x16(int64_t kc, const uint32_t* a, const int16_t* b,
                                               int32_t* c, int64_t ldc, bool accumulate) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00;
  for (int64_t t = 0; t < kc; ++t) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + t * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + t * 32 + 16));
    const uint32_t* at = a + t * kRows;
    __m256i x = _mm256_set1_epi32(static_cast<int32_t>(at[0]));
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(x, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(x, b1));
    x = _mm256_set1_epi32(static_cast<int32_t>(at[1]));
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(x, b0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(x, b1));
    x = _mm256_set1_epi32(static_cast<int32_t>(at[2]));
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(x, b0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(x, b1));
    x = _mm256_set1_epi32(static_cast<int32_t>(at[3]));
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(x, b0));
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(x, b1));
  }
  const __m256i rows[kRows][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
  for (int64_t r = 0; r < kRows; ++r) {
    auto* p = reinterpret_cast<__m256i*>(c + r * ldc);
    __m256i lo = rows[r][0], hi = rows[r][1];
    if (accumulate) {
      lo = _mm256_add_epi32(lo, _mm256_loadu_si256(p));
      hi = _mm256_add_epi32(hi, _mm256_loadu_si256(p + 1));
    }
    _mm256_storeu_si256(p, lo);
    _mm256_storeu_si256(p + 1, hi);
  }
}

// Row-major b, a whole panel and pair: the (b[2t, j], b[2t + 1, j]) int16 pairs in column
// order (r1 null: an odd last k, paired with 0).
__attribute__((target("avx2"))) void pack_pair_avx2(const int8_t* r0, const int8_t* r1,
                                                    int16_t* out) {
  const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0));
  const __m128i x1 =
      r1 != nullptr ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1)) : _mm_setzero_si128();
  __m256i lo, hi;
  widen_pairs_avx2(x0, x1, lo, hi);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), lo);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), hi);
}
#endif

// a as pack_a writes it, every block: (row block, k block) at
// (ib * k_blocks + kb) * kBlockRows * kKPairs, each block laid out with its own pair count.
struct PackedA {
  const uint32_t* data;
  int64_t k_blocks;
  const uint32_t* block(int64_t ib, int64_t kb) const {
    return data + (ib * k_blocks + kb) * kBlockRows * kKPairs;
  }
};

// Panels [p0, p1) of c, in column blocks of `block_panels` panels (their slice of one k
// block, block_panels x 16 KiB, stays in L2 while every row block of a passes by), then
// the k blocks, the row blocks, and every kRows-row group of a row block against each
// panel, which stays in L1 across them.
void run_panels(const PackedA& a, int64_t m, int64_t k, int64_t n, const int16_t* b, int32_t* c,
                int64_t ldc, int64_t p0, int64_t p1, int64_t block_panels) {
#ifdef CF_HAVE_MADD16
  const int64_t kp = pairs(k);
  alignas(32) uint32_t tile[kRows * kPanel];
  for (int64_t j0 = p0; j0 < p1; j0 += block_panels) {
    const int64_t j1 = std::min(p1, j0 + block_panels);
    for (int64_t t0 = 0; t0 < kp; t0 += kKPairs) {
      const int64_t kc = std::min(kKPairs, kp - t0);
      const bool accumulate = t0 != 0;
      for (int64_t i0 = 0; i0 < m; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, m - i0);
        const uint32_t* ablock = a.block(i0 / kBlockRows, t0 / kKPairs);
        for (int64_t p = j0; p < j1; ++p) {
          const int16_t* bp = b + (p * kp + t0) * (kPairBytes / 2);
          const int64_t cols = std::min(kPanel, n - p * kPanel);
          for (int64_t g = 0; g * kRows < rows; ++g) {
            const uint32_t* ag = ablock + g * kc * kRows;
            int32_t* cg = c + (i0 + g * kRows) * ldc + p * kPanel;
            const int64_t r = std::min(kRows, rows - g * kRows);
            if (r == kRows && cols == kPanel) {
              tile_4x16(kc, ag, bp, cg, ldc, accumulate);
            } else {
              tile_4x16(kc, ag, bp, reinterpret_cast<int32_t*>(tile), kPanel, false);
              store_partial(tile, r, cols, cg, ldc, accumulate);
            }
          }
        }
      }
    }
  }
#else
  (void)a, (void)m, (void)k, (void)n, (void)b, (void)c, (void)ldc, (void)p0, (void)p1,
      (void)block_panels;
  CF_ASSERT(false);
#endif
}

}  // namespace

bool madd16_available() {
#ifdef CF_HAVE_MADD16
  return ::commfuse::cpu::use_avx2();
#else
  return false;
#endif
}

size_t madd16_packed_b_bytes(int64_t k, int64_t n) {
  return static_cast<size_t>(pairs(k) * panels(n) * kPairBytes);
}

void madd16_pack_b(const int8_t* b, int64_t k, int64_t n, int64_t ldb, bool b_transposed,
                   void* packed) {
  auto* out = static_cast<int16_t*>(packed);
  const int64_t kp = pairs(k), np = panels(n);
  // Four panels (one 64-byte line of a b row) at a time down all of k: whole lines read,
  // four sequential streams written. (Pair by pair across all panels wrote lines 2 * k
  // * 32 bytes apart: 8.7 ms for 4096 x 4096 against 3.3 ms to widen it to fp32.)
  constexpr int64_t kGroup = 4;
  const bool avx2 = madd16_available();
  for (int64_t p0 = 0; p0 < np; p0 += kGroup)
    for (int64_t t = 0; t < kp; ++t)
      for (int64_t p = p0; p < std::min(np, p0 + kGroup); ++p) {
        int16_t* o = out + (p * kp + t) * (kPairBytes / 2);
#ifdef CF_HAVE_MADD16
        if (avx2 && !b_transposed && (p + 1) * kPanel <= n) {
          const int8_t* r0 = b + 2 * t * ldb + p * kPanel;
          pack_pair_avx2(r0, 2 * t + 1 < k ? r0 + ldb : nullptr, o);
          continue;
        }
#endif
        for (int64_t j = 0; j < kPanel; ++j)
          for (int64_t e = 0; e < 2; ++e)
            o[j * 2 + e] = b_at(b, k, n, ldb, b_transposed, 2 * t + e, p * kPanel + j);
      }
}

void madd16_gemm(const int8_t* a, int64_t m, int64_t k, int64_t n, int64_t lda, const void* packed,
                 int32_t* c, int64_t ldc, int threads) {
  CF_ASSERT(madd16_available());
  const auto* b = static_cast<const int16_t*>(packed);
  const int64_t np = panels(n), kp = pairs(k);
  // All of a packed once per call (m x k x 2 bytes), shared by the threads and by every
  // column block.
  const int64_t row_blocks = (m + kBlockRows - 1) / kBlockRows;
  const int64_t k_blocks = (kp + kKPairs - 1) / kKPairs;
  thread_local std::vector<uint32_t> apack;
  apack.resize(static_cast<size_t>(row_blocks * k_blocks * kBlockRows * kKPairs));
  const PackedA pa{apack.data(), k_blocks};
  for (int64_t ib = 0; ib < row_blocks; ++ib)
    for (int64_t kb = 0; kb < k_blocks; ++kb)
      pack_a(a, k, lda, ib * kBlockRows, std::min(kBlockRows, m - ib * kBlockRows), kb * kKPairs,
             std::min(kKPairs, kp - kb * kKPairs),
             apack.data() + (ib * k_blocks + kb) * kBlockRows * kKPairs);
  // Column blocks whose slice of one k block (16 KiB a panel) fills half of L2.
  const int64_t block_panels = std::max<int64_t>(
      1, static_cast<int64_t>(::commfuse::cpu::l2_cache_bytes() / 2) / (kKPairs * kPairBytes));
  const int64_t parts = std::clamp<int64_t>(threads, 1, np);
  // One thread: no OpenMP region at all (small_m_gemm.cpp: even an idle one costs per call).
  if (parts <= 1) {
    run_panels(pa, m, k, n, b, c, ldc, 0, np, block_panels);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(parts)) schedule(static)
  for (int64_t part = 0; part < parts; ++part)
    run_panels(pa, m, k, n, b, c, ldc, np * part / parts, np * (part + 1) / parts, block_panels);
}

}  // namespace commfuse::kernels::cpu
