// Per-token quantization loops (quant_per_token.hpp). Straight loops over fp32 that GCC
// vectorizes (CF_SIMD_KERNEL); the arithmetic is the formula of SPEC §3 in fp32, so the
// vector and scalar forms give the same bits (one multiply, one rint, one clamp).
#include "kernels/cpu/quant_per_token.hpp"

#include <cmath>

#include "core/simd.hpp"

namespace commfuse::kernels::cpu {

// simd::lane_max says why 32 lanes (and its loop ran 8 ms of a 66 ms alltoall_quant_matmul
// as one running maximum).
CF_SIMD_KERNEL(float, abs_max, (const float* v, size_t count), (v, count)) {
  return simd::lane_max(count, [v](size_t i) { return std::fabs(v[i]); });
}

namespace {
CF_SIMD_KERNEL_AVX512(float, quantize_row_in_mode,
                      (const float* v, size_t count, float amax, int qmax, int8_t* q),
                      (v, count, amax, qmax, q)) {
  if (!(amax > 0.0f)) {  // all-zero row (SPEC §3: zeros with s = 0, where CANN gives NaN)
    for (size_t i = 0; i < count; ++i) q[i] = 0;
    return 0.0f;
  }
  const float qf = static_cast<float>(qmax);
  const float inv = qf / amax;
  for (size_t i = 0; i < count; ++i) {
    float t = std::nearbyint(v[i] * inv);  // half to even: the caller's StandardFloatMode
    t = t > qf ? qf : t;
    t = t < -qf ? -qf : t;
    t = t == t ? t : 0.0f;  // NaN -> 0
    q[i] = static_cast<int8_t>(t);
  }
  return amax / qf;
}
}  // namespace

float quantize_row_with_amax(const float* v, size_t count, float amax, int qmax, int8_t* q) {
  const simd::StandardFloatMode fp_mode;  // std::nearbyint follows the thread's mode
  return quantize_row_in_mode(v, count, amax, qmax, q);
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
