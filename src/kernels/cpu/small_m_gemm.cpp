#include "kernels/cpu/small_m_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/convert_fast.hpp"
#include "core/simd.hpp"

namespace commfuse::kernels::cpu {
namespace {

// Columns per tile and k per block: a block of b widened to fp32 (kDepth x kTile floats,
// 128 KiB) stays in L2 while every row of a is multiplied with it; the m x kTile fp32
// accumulators stay in L1.
constexpr int64_t kTile = kSmallMColumnTile;
constexpr int64_t kDepth = 256;
constexpr int kLanes = 8;  // partial sums of a dot product (transposed b)
// bf16 rows up to this many multiply b widened in registers (micro_tiles_pairs) rather than
// from a widened block. AMX Xeon, one thread, 4 rows (8-lane / 16-lane copies): 256 x 256
// 8.4 / 5.8 us against 14.8 / 13.1 from the block, 1024 x 1024 185 / 157 against 248 / 221,
// 4096 x 4096 5.6 / 4.0 ms against 5.4 / 5.0; at 16 rows the block won (4096 x 4096: 12.3 /
// 10.0 ms against 17.9 / 10.7).
constexpr int64_t kPairRows = 4;

void widen(DType t, const uint16_t* src, float* dst, size_t count) {
  if (t == DType::kFloat16)
    fast::f16_to_f32(src, dst, count);
  else
    fast::bf16_to_f32(src, dst, count);
}

// depth rows of jn bf16 columns (row stride ldb) -> bt (depth x kTile fp32): one call for
// the whole block, since a call per 128-value row cost more than the widening itself at
// small k and n.
CF_SIMD_KERNEL(void, widen_bf16_block,
               (const uint16_t* b, int64_t ldb, int64_t depth, int64_t jn, float* bt),
               (b, ldb, depth, jn, bt)) {
  for (int64_t p = 0; p < depth; ++p) {
    const uint16_t* src = b + p * ldb;
    uint32_t* dst = reinterpret_cast<uint32_t*>(bt + p * kTile);
    for (int64_t j = 0; j < jn; ++j) dst[j] = static_cast<uint32_t>(src[j]) << 16;
  }
}

// L floats as one value (L = 8: 32 bytes; 16: 64 bytes, for the AVX-512 copies): GCC
// lowers the arithmetic to the widest registers of the copy it compiles (one AVX register
// for 8 lanes in the AVX2 copy, two SSE registers in the baseline copy); lane-wise multiply
// and add either way, so every copy and width computes the same bits. Unaligned, and
// allowed to alias float (vf) or the bf16 pairs of b (vu_load).
template <int L>
struct Lanes;
template <>
struct Lanes<8> {
  typedef float vf __attribute__((vector_size(32), aligned(4), may_alias));
  typedef uint32_t vu __attribute__((vector_size(32)));
  typedef uint32_t vu_load __attribute__((vector_size(32), aligned(2), may_alias));
};
template <>
struct Lanes<16> {
  typedef float vf __attribute__((vector_size(64), aligned(4), may_alias));
  typedef uint32_t vu __attribute__((vector_size(64)));
  typedef uint32_t vu_load __attribute__((vector_size(64), aligned(2), may_alias));
};

// Rows [i, i + R) of acc (row stride kTile) += a @ bt (the block of b the caller widened to
// fp32: fp16 always; bf16 for more than kPairRows rows of a, and for a tile narrower than
// kTile)
// over `depth` k and the tile's `cols` columns (a multiple of L * C), in register tiles of R
// rows x C vectors of L lanes (R * C = 8 independent sums, enough to hide the add latency
// one chain per row would wait on). Every element is summed in k order.
template <int L, int R, int C>
inline __attribute__((always_inline)) void micro_tiles(const float* a, int64_t lda, int64_t i,
                                                       const float* bt, int64_t depth, int64_t cols,
                                                       float* acc) {
  using vf = typename Lanes<L>::vf;
  for (int64_t j = 0; j < cols; j += L * C) {
    vf r[R][C];
    for (int x = 0; x < R; ++x)
      for (int y = 0; y < C; ++y)
        r[x][y] = *reinterpret_cast<vf*>(acc + (i + x) * kTile + j + L * y);
    for (int64_t p = 0; p < depth; ++p) {
      vf bv[C];
      for (int y = 0; y < C; ++y) bv[y] = *reinterpret_cast<const vf*>(bt + p * kTile + j + L * y);
      for (int x = 0; x < R; ++x) {
        const float ax = a[(i + x) * lda + p];
        for (int y = 0; y < C; ++y) r[x][y] += ax * bv[y];
      }
    }
    for (int x = 0; x < R; ++x)
      for (int y = 0; y < C; ++y)
        *reinterpret_cast<vf*>(acc + (i + x) * kTile + j + L * y) = r[x][y];
  }
}

// The bf16 in-register path of micro_tiles, two columns per 32-bit lane: one vector load
// holds 2L bf16 values (L = 8 lanes: 32 bytes; L = 16: 64 bytes, the AVX-512 copy), and a
// bf16 is the upper half of its fp32, so lane l's even column (j + 2l) is the lane shifted
// left by 16 and its odd column (j + 2l + 1) the lane with the low half cleared: two
// instructions widen 2L values (a u16x8 -> u32x8 conversion took five for 8). The
// accumulators therefore hold each 2L-column group de-interleaved, L evens then L odds
// (acc_pairs_to_columns restores the order); every element is still summed in k order with
// the same operations (a rounded product, then the add), so the bits are those of
// micro_tiles, at either width.
template <int L, int R, int G>
inline __attribute__((always_inline)) void micro_tiles_pairs(const float* a, int64_t lda, int64_t i,
                                                             const uint16_t* b, int64_t ldb,
                                                             int64_t depth, float* acc) {
  using vf = typename Lanes<L>::vf;
  using vu = typename Lanes<L>::vu;
  using vu_load = typename Lanes<L>::vu_load;
  for (int64_t j = 0; j < kTile; j += 2 * L * G) {
    vf r[R][2 * G];
    for (int x = 0; x < R; ++x)
      for (int y = 0; y < 2 * G; ++y)
        r[x][y] = *reinterpret_cast<vf*>(acc + (i + x) * kTile + j + L * y);
    for (int64_t p = 0; p < depth; ++p) {
      const uint16_t* row = b + p * ldb + j;
      for (int g = 0; g < G; ++g) {
        const vu w = *reinterpret_cast<const vu_load*>(row + 2 * L * g);
        const vu even_bits = w << 16, odd_bits = w & 0xFFFF0000u;
        vf even, odd;
        std::memcpy(&even, &even_bits, sizeof(even));
        std::memcpy(&odd, &odd_bits, sizeof(odd));
        for (int x = 0; x < R; ++x) {
          const float ax = a[(i + x) * lda + p];
          r[x][2 * g] += ax * even;
          r[x][2 * g + 1] += ax * odd;
        }
      }
    }
    for (int x = 0; x < R; ++x)
      for (int y = 0; y < 2 * G; ++y)
        *reinterpret_cast<vf*>(acc + (i + x) * kTile + j + L * y) = r[x][y];
  }
}

// Every row of a against b's bf16 rows in place, in register tiles of 4, 2 and 1 rows, into
// acc in micro_tiles_pairs<L>' order.
template <int L>
inline __attribute__((always_inline)) void bf16_block_rows(const float* a, int64_t lda,
                                                           int64_t rows, const uint16_t* b,
                                                           int64_t ldb, int64_t depth, float* acc) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) micro_tiles_pairs<L, 4, 1>(a, lda, i, b, ldb, depth, acc);
  for (; i + 2 <= rows; i += 2) micro_tiles_pairs<L, 2, 2>(a, lda, i, b, ldb, depth, acc);
  for (; i < rows; ++i) micro_tiles_pairs<L, 1, 4>(a, lda, i, b, ldb, depth, acc);
}

// acc rows (kTile floats) from micro_tiles_pairs<L>' order (per 2L columns: L evens, L
// odds) to column order.
void acc_pairs_to_columns(float* acc, int64_t rows, int lanes) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < kTile; j += 2 * lanes) {
      float group[32];
      std::memcpy(group, acc + i * kTile + j, sizeof(float) * 2 * static_cast<size_t>(lanes));
      for (int l = 0; l < lanes; ++l) {
        acc[i * kTile + j + 2 * l] = group[l];
        acc[i * kTile + j + 2 * l + 1] = group[lanes + l];
      }
    }
}

template <int L>
inline __attribute__((always_inline)) void block_rows(const float* a, int64_t lda, int64_t rows,
                                                      const float* bt, int64_t depth, int64_t cols,
                                                      float* acc) {
  constexpr int kWide = 64 / L;  // one row: vectors spanning 64 columns
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) micro_tiles<L, 4, 2>(a, lda, i, bt, depth, cols, acc);
  for (; i + 2 <= rows; i += 2) micro_tiles<L, 2, 4>(a, lda, i, bt, depth, cols, acc);
  for (; i < rows; ++i) micro_tiles<L, 1, kWide>(a, lda, i, bt, depth, cols, acc);
}

// acc (rows x kTile) += a (rows x depth, row stride lda) @ bt (depth x kTile fp32).
// cols: the tile's columns rounded up to 64 (the widest register tile).
CF_SIMD_KERNEL(void, block_product,
               (const float* a, int64_t lda, int64_t rows, const float* bt, int64_t depth,
                int64_t cols, float* acc),
               (a, lda, rows, bt, depth, cols, acc)) {
  block_rows<8>(a, lda, rows, bt, depth, cols, acc);
}

// The same with b's bf16 rows read in place (a full tile: kTile columns from b), into acc
// in micro_tiles_pairs<8>' de-interleaved order.
CF_SIMD_KERNEL(void, block_product_bf16,
               (const float* a, int64_t lda, int64_t rows, const uint16_t* b, int64_t ldb,
                int64_t depth, float* acc),
               (a, lda, rows, b, ldb, depth, acc)) {
  bf16_block_rows<8>(a, lda, rows, b, ldb, depth, acc);
}

#ifdef CF_SIMD_TARGET_AVX512
// 16 lanes where the AVX-512 copies may run (cpu::use_avx512): twice the columns per
// multiply and add. Both products are bound by those (separate, as every copy must round
// the product: simd.hpp), not by reading b, wherever b stays in cache: 1 row of 256 x 256
// bf16 took 2.9 us with 8 lanes and 2.1 with 16 (AMX Xeon, one thread).
CF_SIMD_TARGET_AVX512 void block_product_wide(const float* a, int64_t lda, int64_t rows,
                                              const float* bt, int64_t depth, int64_t cols,
                                              float* acc) {
  block_rows<16>(a, lda, rows, bt, depth, cols, acc);
}

// Into acc in micro_tiles_pairs<16>' order.
CF_SIMD_TARGET_AVX512 void block_product_bf16_wide(const float* a, int64_t lda, int64_t rows,
                                                   const uint16_t* b, int64_t ldb, int64_t depth,
                                                   float* acc) {
  bf16_block_rows<16>(a, lda, rows, b, ldb, depth, acc);
}
#endif

// block_product at the widest lanes this process may use.
void block_product_any(const float* a, int64_t lda, int64_t rows, const float* bt, int64_t depth,
                       int64_t cols, float* acc) {
#ifdef CF_SIMD_TARGET_AVX512
  if (::commfuse::cpu::use_avx512()) {
    block_product_wide(a, lda, rows, bt, depth, cols, acc);
    return;
  }
#endif
  block_product(a, lda, rows, bt, depth, cols, acc);
}

// block_product_bf16 at the widest lanes this process may use; returns those lanes (the
// order acc_pairs_to_columns undoes).
int block_product_bf16_any(const float* a, int64_t lda, int64_t rows, const uint16_t* b,
                           int64_t ldb, int64_t depth, float* acc) {
#ifdef CF_SIMD_TARGET_AVX512
  if (::commfuse::cpu::use_avx512()) {
    block_product_bf16_wide(a, lda, rows, b, ldb, depth, acc);
    return 16;
  }
#endif
  block_product_bf16(a, lda, rows, b, ldb, depth, acc);
  return 8;
}

// Eight interleaved partial sums of x . y over count (a multiple of kLanes) elements.
CF_SIMD_KERNEL(void, dot_lanes, (const float* x, const float* y, int64_t count, float* lanes),
               (x, y, count, lanes)) {
  using v8 = Lanes<kLanes>::vf;
  v8 s = {};
  for (int64_t i = 0; i < count; i += kLanes)
    s += *reinterpret_cast<const v8*>(x + i) * *reinterpret_cast<const v8*>(y + i);
  std::memcpy(lanes, &s, sizeof(s));
}

// Output columns [j0, j0 + jn) of every row, as fp32 in acc (m x kTile); bt: kDepth x kTile.
void tile_row_major(const MatmulDesc& d, const float* a32, const uint16_t* b, int64_t j0,
                    int64_t jn, float* acc, float* bt) {
  std::fill(acc, acc + d.m * kTile, 0.0f);
  // A narrow tile computes only its columns rounded up to 64; those padding columns of bt
  // are zero (widen writes the first jn of each row).
  const int64_t cols = (jn + 63) / 64 * 64;
  if (jn < cols)
    for (int64_t p = 0; p < kDepth; ++p)
      std::fill(bt + p * kTile + jn, bt + p * kTile + cols, 0.0f);
  // Up to kPairRows rows of bf16 read each b value once per tile of rows: widened in
  // registers, no fp32 copy. More rows reuse it, so the block is widened once into bt.
  if (d.b_dtype == DType::kBFloat16 && jn == kTile && d.m <= kPairRows) {
    int lanes = 8;
    for (int64_t p0 = 0; p0 < d.k; p0 += kDepth)
      lanes = block_product_bf16_any(a32 + p0, d.k, d.m, b + p0 * d.ldb + j0, d.ldb,
                                     std::min(kDepth, d.k - p0), acc);
    acc_pairs_to_columns(acc, d.m, lanes);
    return;
  }
  for (int64_t p0 = 0; p0 < d.k; p0 += kDepth) {
    const int64_t depth = std::min(kDepth, d.k - p0);
    if (d.b_dtype == DType::kBFloat16)
      widen_bf16_block(b + p0 * d.ldb + j0, d.ldb, depth, jn, bt);
    else
      for (int64_t p = 0; p < depth; ++p)
        widen(d.b_dtype, b + (p0 + p) * d.ldb + j0, bt + p * kTile, static_cast<size_t>(jn));
    block_product_any(a32 + p0, d.k, d.m, bt, depth, cols, acc);
  }
}

void tile_transposed(const MatmulDesc& d, const float* a32, const uint16_t* b, int64_t j0,
                     int64_t jn, float* acc, float* bcol) {
  const int64_t body = d.k / kLanes * kLanes;
  for (int64_t j = 0; j < jn; ++j) {
    widen(d.b_dtype, b + (j0 + j) * d.ldb, bcol, static_cast<size_t>(d.k));
    for (int64_t i = 0; i < d.m; ++i) {
      const float* x = a32 + i * d.k;
      float lanes[kLanes];
      dot_lanes(x, bcol, body, lanes);
      float s = 0.0f;
      for (int l = 0; l < kLanes; ++l) s += lanes[l];
      for (int64_t p = body; p < d.k; ++p) s += x[p] * bcol[p];
      acc[i * kTile + j] = s;
    }
  }
}

void store_tile(const MatmulDesc& d, float* acc, const float* bias32, int64_t j0, int64_t jn,
                void* c) {
  for (int64_t i = 0; i < d.m; ++i) {
    float* row = acc + i * kTile;
    if (bias32 != nullptr)
      for (int64_t j = 0; j < jn; ++j) row[j] += bias32[j0 + j];
    const int64_t at = i * d.ldc + j0;
    if (d.c_dtype == DType::kFloat32)
      std::memcpy(static_cast<float*>(c) + at, row, static_cast<size_t>(jn) * sizeof(float));
    else if (d.c_dtype == DType::kFloat16)
      fast::f32_to_f16(row, static_cast<uint16_t*>(c) + at, static_cast<size_t>(jn));
    else
      fast::f32_to_bf16(row, static_cast<uint16_t*>(c) + at, static_cast<size_t>(jn));
  }
}

}  // namespace

bool small_m_gemm_applies(const MatmulDesc& d) {
  const bool sixteen = d.a_dtype == DType::kFloat16 || d.a_dtype == DType::kBFloat16;
  return sixteen && d.b_dtype == d.a_dtype && d.m >= 1 && d.m <= kSmallMRows && !d.accumulate;
}

void small_m_gemm(const MatmulDesc& d, const void* a, const void* b, const float* bias32, void* c,
                  int threads) {
  // a is small (m x k): widened once, dense.
  thread_local std::vector<float> a32;
  a32.resize(static_cast<size_t>(d.m * d.k));
  const auto* a16 = static_cast<const uint16_t*>(a);
  for (int64_t i = 0; i < d.m; ++i)
    widen(d.a_dtype, a16 + i * d.lda, a32.data() + i * d.k, static_cast<size_t>(d.k));
  const auto* b16 = static_cast<const uint16_t*>(b);
  const float* a_dense = a32.data();
  const int64_t tiles = (d.n + kTile - 1) / kTile;
  auto tile = [&](int64_t t) {
    thread_local std::vector<float> acc, scratch;
    acc.resize(static_cast<size_t>(d.m * kTile));
    const int64_t j0 = t * kTile, jn = std::min(kTile, d.n - j0);
    if (d.b_transposed) {
      scratch.resize(static_cast<size_t>(d.k));
      tile_transposed(d, a_dense, b16, j0, jn, acc.data(), scratch.data());
    } else {
      scratch.resize(static_cast<size_t>(kDepth * kTile));
      tile_row_major(d, a_dense, b16, j0, jn, acc.data(), scratch.data());
    }
    store_tile(d, acc.data(), bias32, j0, jn, c);
  };
  // One thread: no OpenMP region at all (even an inactive one has a fixed cost per call,
  // which tiny GEMMs notice).
  if (threads <= 1) {
    for (int64_t t = 0; t < tiles; ++t) tile(t);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t t = 0; t < tiles; ++t) tile(t);
}

}  // namespace commfuse::kernels::cpu
