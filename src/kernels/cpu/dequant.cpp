#include "kernels/cpu/dequant.hpp"

#include <algorithm>
#include <cstring>

#include "core/code_values.hpp"
#include "core/convert_fast.hpp"
#include "core/error.hpp"
#include "core/simd.hpp"
#include "kernels/cpu/code_decode.hpp"

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
// The 8-bit float formats: their codes decoded in blocks by decode_codes (bit-equal to the
// table), then the same multiply and add per element.
CF_SIMD_KERNEL(void, f32_set, (const float* v, float s, float* acc, int64_t n), (v, s, acc, n)) {
  for (int64_t i = 0; i < n; ++i) acc[i] = v[i] * s;
}
CF_SIMD_KERNEL(void, f32_add, (const float* v, float s, float* acc, int64_t n), (v, s, acc, n)) {
  for (int64_t i = 0; i < n; ++i) acc[i] += v[i] * s;
}

// Codes decoded per block of this many: a multiple of both groups, on the stack.
constexpr int64_t kDecodeBlock = 512;
static_assert(kDecodeBlock % kKgGroup == 0 && kDecodeBlock % kMxGroup == 0);

}  // namespace

void dequant_accumulate_row(DType x_dtype, ScaleKind kind, const uint8_t* codes,
                            const uint8_t* scales, int64_t h, float* acc, bool first) {
  const int64_t g = scale_group(kind);
  const float* e8m0 = code_values(DType::kFloat8E8M0);
  auto scale = [&](int64_t j) {
    float s;
    if (kind == ScaleKind::kGroup128)
      std::memcpy(&s, scales + 4 * j, sizeof s);  // rows in a slot need not be 4-aligned
    else
      s = e8m0[scales[j]];
    return s;
  };
  if (x_dtype == DType::kInt8) {
    for (int64_t j = 0; j * g < h; ++j)
      first ? int8_set(codes + j * g, scale(j), acc + j * g, g)
            : int8_add(codes + j * g, scale(j), acc + j * g, g);
    return;
  }
  // FP8/HiF8: a table lookup per element does not vectorize (MX e4m3 all_reduce at W = 2
  // ran at 0.4-0.5x of MPI's fp32 all_reduce, 4x slower than int8); decode_codes does.
  alignas(64) float v[kDecodeBlock];
  for (int64_t b0 = 0; b0 < h; b0 += kDecodeBlock) {
    const int64_t nb = std::min(kDecodeBlock, h - b0);
    decode_codes(codes + b0, x_dtype, false, v, static_cast<size_t>(nb));
    for (int64_t i = 0; i < nb; i += g) {
      const int64_t j = (b0 + i) / g;
      first ? f32_set(v + i, scale(j), acc + b0 + i, g) : f32_add(v + i, scale(j), acc + b0 + i, g);
    }
  }
}

// Compiled for AVX2 and baseline like every loop here (core/simd.hpp); the library is
// built with -ffp-contract=off, so the multiply and the bias add round separately as SPEC
// §6 orders them, on either copy (tests/unit/test_array_loops.cpp).
CF_SIMD_KERNEL(void, scale_int_row,
               (const int32_t* acc, float sa, const float* b_scale, const float* bias32, float* y,
                size_t n),
               (acc, sa, b_scale, bias32, y, n)) {
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
