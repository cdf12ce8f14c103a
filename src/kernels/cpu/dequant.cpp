#include "kernels/cpu/dequant.hpp"

#include <cstring>

#include "core/code_values.hpp"
#include "core/convert_fast.hpp"
#include "core/error.hpp"
#include "core/simd.hpp"

namespace commfuse::kernels::cpu {
namespace {

// The multiply and the add are separate fp32 operations (no FMA is enabled for these
// clones), as SPEC §4 defines the sum.
CF_SIMD_KERNEL(void, int8_set, (const uint8_t* c, float s, float* acc, int64_t n), (c, s, acc, n)) {
  for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<float>(static_cast<int8_t>(c[i])) * s;
}
CF_SIMD_KERNEL(void, int8_add, (const uint8_t* c, float s, float* acc, int64_t n), (c, s, acc, n)) {
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<float>(static_cast<int8_t>(c[i])) * s;
}
CF_SIMD_KERNEL(void, table_set,
               (const float* lut, const uint8_t* c, float s, float* acc, int64_t n),
               (lut, c, s, acc, n)) {
  for (int64_t i = 0; i < n; ++i) acc[i] = lut[c[i]] * s;
}
CF_SIMD_KERNEL(void, table_add,
               (const float* lut, const uint8_t* c, float s, float* acc, int64_t n),
               (lut, c, s, acc, n)) {
  for (int64_t i = 0; i < n; ++i) acc[i] += lut[c[i]] * s;
}

}  // namespace

void dequant_accumulate_row(DType x_dtype, ScaleKind kind, const uint8_t* codes,
                            const uint8_t* scales, int64_t h, float* acc, bool first) {
  const int64_t g = scale_group(kind);
  const float* e8m0 = code_values(DType::kFloat8E8M0);
  const float* lut = x_dtype == DType::kInt8 ? nullptr : code_values(x_dtype);
  for (int64_t j = 0; j * g < h; ++j) {
    float s;
    if (kind == ScaleKind::kGroup128)
      std::memcpy(&s, scales + 4 * j, sizeof s);  // rows in a slot need not be 4-aligned
    else
      s = e8m0[scales[j]];
    const uint8_t* c = codes + j * g;
    float* a = acc + j * g;
    if (lut == nullptr)
      first ? int8_set(c, s, a, g) : int8_add(c, s, a, g);
    else
      first ? table_set(lut, c, s, a, g) : table_add(lut, c, s, a, g);
  }
}

// Compiled for AVX2 and baseline like every loop here (core/simd.hpp); no FMA, so the
// multiply and the bias add round separately as SPEC §6 orders them, on either copy.
CF_SIMD_KERNEL(void, scale_int_row,
               (const int32_t* acc, float sa, const float* b_scale, const float* bias32, float* y,
                size_t n),
               (acc, sa, b_scale, bias32, y, n)) {
  // The product and the bias add as two statements: no compiler may fuse them into one
  // FMA (SPEC §6 rounds each).
  if (bias32 != nullptr)
    for (size_t j = 0; j < n; ++j) {
      const float p = static_cast<float>(acc[j]) * (sa * b_scale[j]);
      y[j] = p + bias32[j];
    }
  else
    for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(acc[j]) * (sa * b_scale[j]);
}

CF_SIMD_KERNEL(void, scale_f32_row,
               (const float* acc, float sa, const float* b_scale, const float* bias32, float* y,
                size_t n),
               (acc, sa, b_scale, bias32, y, n)) {
  if (bias32 != nullptr)
    for (size_t j = 0; j < n; ++j) {
      const float p = acc[j] * (sa * b_scale[j]);
      y[j] = p + bias32[j];
    }
  else
    for (size_t j = 0; j < n; ++j) y[j] = acc[j] * (sa * b_scale[j]);
}

void store_f32_as(const float* acc, void* dst, DType out_dtype, size_t count) {
  switch (out_dtype) {
    case DType::kFloat32:
      if (dst != acc) std::memcpy(dst, acc, count * sizeof(float));
      return;
    case DType::kFloat16:
      fast::f32_to_f16(acc, static_cast<uint16_t*>(dst), count);
      return;
    case DType::kBFloat16:
      fast::f32_to_bf16(acc, static_cast<uint16_t*>(dst), count);
      return;
    default:
      CF_ASSERT(false && "store_f32_as: output must be float32, float16 or bfloat16");
  }
}

}  // namespace commfuse::kernels::cpu
