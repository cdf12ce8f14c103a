#include "kernels/cpu/dequant.hpp"

#include <array>
#include <cstring>

#include "core/convert_fast.hpp"
#include "core/error.hpp"
#include "core/simd.hpp"

namespace commfuse::kernels::cpu {
namespace {

using Table = std::array<float, 256>;

Table make_table(DType t) {
  Table v{};
  std::array<uint8_t, 256> codes{};
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  switch (t) {
    case DType::kInt8:
      for (int i = 0; i < 256; ++i) v[i] = static_cast<float>(static_cast<int8_t>(i));
      break;
    case DType::kHiFloat8:
      fast::hif8_to_f32(codes.data(), v.data(), 256);
      break;
    case DType::kFloat8E4M3FN:
      fast::e4m3fn_to_f32(codes.data(), v.data(), 256);
      break;
    case DType::kFloat8E5M2:
      fast::e5m2_to_f32(codes.data(), v.data(), 256);
      break;
    case DType::kFloat8E8M0:
      fast::e8m0_to_f32(codes.data(), v.data(), 256);
      break;
    default:
      CF_ASSERT(false && "code_values: not an 8-bit format");
  }
  return v;
}

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

const float* code_values(DType dtype) {
  static const Table i8 = make_table(DType::kInt8);
  static const Table hif8 = make_table(DType::kHiFloat8);
  static const Table e4m3 = make_table(DType::kFloat8E4M3FN);
  static const Table e5m2 = make_table(DType::kFloat8E5M2);
  static const Table e8m0 = make_table(DType::kFloat8E8M0);
  switch (dtype) {
    case DType::kInt8:
      return i8.data();
    case DType::kHiFloat8:
      return hif8.data();
    case DType::kFloat8E4M3FN:
      return e4m3.data();
    case DType::kFloat8E5M2:
      return e5m2.data();
    case DType::kFloat8E8M0:
      return e8m0.data();
    default:
      CF_ASSERT(false && "code_values: not an 8-bit format");
  }
  return nullptr;
}

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
