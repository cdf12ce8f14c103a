// alltoall_quant_matmul's row loops (row_kernels.hpp), vectorized per ISA (core/simd.hpp).
#include "ops/alltoall_quant_matmul/row_kernels.hpp"

#include <cstring>

#include "core/convert_fast.hpp"
#include "core/simd.hpp"
#include "kernels/cpu/quant_per_token.hpp"

namespace commfuse::ops::a2aq {

// v *= smooth, and the largest |v| (simd::lane_max: 16 lanes took 2.5 us per 4096 floats
// on the AMX Xeon, 32 lanes 0.42 us).
CF_SIMD_KERNEL(float, mul_abs_max, (float* v, const float* smooth, size_t n), (v, smooth, n)) {
  return simd::lane_max(n, [v, smooth](size_t i) {
    v[i] *= smooth[i];
    return v[i] < 0 ? -v[i] : v[i];
  });
}

// y = f32(acc) * x2_scale[j] * s + bias[j] for one output row (bias32 null: no bias).
CF_SIMD_KERNEL_AVX512(void, dequant_row,
                      (const int32_t* acc, const float* x2_scale, float s, const float* bias32,
                       float* y, size_t n),
                      (acc, x2_scale, s, bias32, y, n)) {
  if (bias32 != nullptr)
    for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(acc[j]) * x2_scale[j] * s + bias32[j];
  else
    for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(acc[j]) * x2_scale[j] * s;
}

// A4W4: y (+)= f32(acc) * s * x2_scale[j], one source segment's partial product.
CF_SIMD_KERNEL_AVX512(void, dequant_segment,
                      (const int32_t* acc, const float* x2_scale, float s, float* y, size_t n,
                       bool first),
                      (acc, x2_scale, s, y, n, first)) {
  if (first)
    for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(acc[j]) * s * x2_scale[j];
  else
    for (size_t j = 0; j < n; ++j) y[j] += static_cast<float>(acc[j]) * s * x2_scale[j];
}

CF_SIMD_KERNEL(void, add_bias, (float* y, const float* bias32, size_t n), (y, bias32, n)) {
  for (size_t j = 0; j < n; ++j) y[j] += bias32[j];
}

void store_row(const float* y, DType t, void* dst, size_t n) {
  if (t == DType::kFloat16)
    fast::f32_to_f16(y, static_cast<uint16_t*>(dst), n);
  else if (t == DType::kBFloat16)
    fast::f32_to_bf16(y, static_cast<uint16_t*>(dst), n);
  else
    std::memcpy(dst, y, n * sizeof(float));
}

void widen_half(const void* src, DType t, float* dst, size_t n) {
  if (t == DType::kFloat16)
    fast::f16_to_f32(static_cast<const uint16_t*>(src), dst, n);
  else
    fast::bf16_to_f32(static_cast<const uint16_t*>(src), dst, n);
}

// One amax call over the whole row: the fused schedule once took it per source segment,
// R calls on H = 128 floats, and ran 0.85-0.92x the unfused pass at W = 2-8 (AMD EPYC Zen 4).
float quantize_row(float* row, size_t k, const float* smooth, int qmax, int8_t* q) {
  const float amax = smooth ? mul_abs_max(row, smooth, k) : kernels::cpu::abs_max(row, k);
  return kernels::cpu::quantize_row_with_amax(row, k, amax, qmax, q);
}

}  // namespace commfuse::ops::a2aq
