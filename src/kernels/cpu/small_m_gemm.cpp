#include "kernels/cpu/small_m_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/convert_fast.hpp"
#include "core/simd.hpp"

namespace commfuse::kernels::cpu {
namespace {

constexpr int64_t kTile = 128;  // columns per tile: m x 128 fp32 accumulators stay in L1
constexpr int kLanes = 8;       // partial sums of a dot product (transposed b)

void widen(DType t, const uint16_t* src, float* dst, size_t count) {
  if (t == DType::kFloat16)
    fast::f16_to_f32(src, dst, count);
  else
    fast::bf16_to_f32(src, dst, count);
}

// acc[j] += s * row[j]
CF_SIMD_KERNEL(void, axpy, (float* acc, float s, const float* row, int64_t n), (acc, s, row, n)) {
  for (int64_t j = 0; j < n; ++j) acc[j] += s * row[j];
}

// Eight interleaved partial sums of x . y over count (a multiple of kLanes) elements.
CF_SIMD_KERNEL(void, dot_lanes, (const float* x, const float* y, int64_t count, float* lanes),
               (x, y, count, lanes)) {
  for (int l = 0; l < kLanes; ++l) lanes[l] = 0.0f;
  for (int64_t i = 0; i < count; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * y[i + l];
}

// Output columns [j0, j0 + jn) of every row, as fp32 in acc (m x kTile).
void tile_row_major(const MatmulDesc& d, const float* a32, const uint16_t* b, int64_t j0,
                    int64_t jn, float* acc) {
  float brow[kTile];
  std::fill(acc, acc + d.m * kTile, 0.0f);
  for (int64_t p = 0; p < d.k; ++p) {
    widen(d.b_dtype, b + p * d.ldb + j0, brow, static_cast<size_t>(jn));
    for (int64_t i = 0; i < d.m; ++i) axpy(acc + i * kTile, a32[i * d.k + p], brow, jn);
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
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    thread_local std::vector<float> acc, bcol;
    acc.resize(static_cast<size_t>(d.m * kTile));
    const int64_t j0 = t * kTile, jn = std::min(kTile, d.n - j0);
    if (d.b_transposed) {
      bcol.resize(static_cast<size_t>(d.k));
      tile_transposed(d, a_dense, b16, j0, jn, acc.data(), bcol.data());
    } else {
      tile_row_major(d, a_dense, b16, j0, jn, acc.data());
    }
    store_tile(d, acc.data(), bias32, j0, jn, c);
  }
}

}  // namespace commfuse::kernels::cpu
