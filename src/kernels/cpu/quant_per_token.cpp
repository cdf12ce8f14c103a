// Per-token quantization loops (quant_per_token.hpp). Straight loops over fp32 that GCC
// vectorizes (CF_SIMD_KERNEL); the arithmetic is the formula of SPEC §3 in fp32, so the
// vector and scalar forms give the same bits (one multiply, one rint, one clamp).
#include "kernels/cpu/quant_per_token.hpp"

#include <cmath>

#include "core/simd.hpp"

namespace commfuse::kernels::cpu {

// kMaxLanes running maxima, combined at the end: the same value as one running maximum (a
// maximum does not depend on the order, and no lane ever holds a NaN), but GCC vectorizes
// independent lanes, where it keeps one running `a > m ? a : m` scalar for want of
// -ffinite-math-only (1 ns per element on the AMX Xeon: 8 ms of a 66 ms
// alltoall_quant_matmul). 32 lanes, not 16: with 16, each vector register's maximum was one
// dependent chain (4096 floats in 0.67 us on the AMX Xeon, the loop built for AVX2 or for
// AVX-512 alike; 32 lanes: 0.16 us, either way, so it keeps the two copies).
constexpr size_t kMaxLanes = 32;

CF_SIMD_KERNEL(float, abs_max, (const float* v, size_t count), (v, count)) {
  float lane[kMaxLanes] = {};
  size_t i = 0;
  for (; i + kMaxLanes <= count; i += kMaxLanes)
    for (size_t l = 0; l < kMaxLanes; ++l) {
      const float a = std::fabs(v[i + l]);
      lane[l] = a > lane[l] ? a : lane[l];  // a NaN compares false and is skipped
    }
  float m = 0.0f;
  for (; i < count; ++i) {
    const float a = std::fabs(v[i]);
    m = a > m ? a : m;
  }
  for (const float a : lane) m = a > m ? a : m;
  return m;
}

CF_SIMD_KERNEL_AVX512(float, quantize_row_with_amax,
                      (const float* v, size_t count, float amax, int qmax, int8_t* q),
                      (v, count, amax, qmax, q)) {
  if (!(amax > 0.0f)) {  // all-zero row (SPEC §3: zeros with s = 0, where CANN gives NaN)
    for (size_t i = 0; i < count; ++i) q[i] = 0;
    return 0.0f;
  }
  const float qf = static_cast<float>(qmax);
  const float inv = qf / amax;
  for (size_t i = 0; i < count; ++i) {
    float t = std::nearbyint(v[i] * inv);  // round half to even in the default mode
    t = t > qf ? qf : t;
    t = t < -qf ? -qf : t;
    t = t == t ? t : 0.0f;  // NaN -> 0
    q[i] = static_cast<int8_t>(t);
  }
  return amax / qf;
}

float quantize_row_per_token(const float* v, size_t count, int qmax, int8_t* q) {
  return quantize_row_with_amax(v, count, abs_max(v, count), qmax, q);
}

void quantize_per_token(const float* x, int64_t rows, int64_t cols, int qmax, int8_t* q,
                        float* scales) {
  for (int64_t r = 0; r < rows; ++r)
    scales[r] = quantize_row_per_token(x + r * cols, static_cast<size_t>(cols), qmax, q + r * cols);
}

}  // namespace commfuse::kernels::cpu
