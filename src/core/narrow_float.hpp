// The encoders of the IEEE-style formats narrower than fp32 (fp16, bf16, fp8 e4m3fn, fp8
// e5m2: SPEC §1) as constexpr functions of the input bits, shared by the CPU converters
// (convert_fast.cpp) and the CUDA kernels (kernels/cuda), so a device result is rounded by
// the same definition, bit for bit.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define CF_HOST_DEVICE __host__ __device__
#else
#define CF_HOST_DEVICE
#endif

namespace commfuse::fast {

// Round-to-nearest-even right shift of a non-negative value: the core of every encoder.
CF_HOST_DEVICE constexpr uint32_t rne_shift(uint32_t v, uint32_t shift) {
  const uint32_t half_minus_one = (1u << (shift - 1)) - 1;
  return (v + half_minus_one + ((v >> shift) & 1u)) >> shift;
}

// An IEEE-style binary format narrower than fp32 (see convert_ref.cpp's Format).
template <int kExpBits, int kManBits, int kBias, bool kHasInf>
struct Narrow {
  static constexpr uint32_t kShift = 23 - kManBits;
  static constexpr uint32_t kSign = 1u << (kExpBits + kManBits);
  static constexpr uint32_t kExpMax = (1u << kExpBits) - 1;
  static constexpr uint32_t kAllMan = (1u << kManBits) - 1;
  static constexpr uint32_t kMaxCode =
      kHasInf ? (((kExpMax - 1) << kManBits) | kAllMan) : ((kExpMax << kManBits) | (kAllMan - 1));
  static constexpr uint32_t kInfCode = kExpMax << kManBits;
  static constexpr uint32_t kNanCode = kHasInf ? (kInfCode | (1u << (kManBits - 1))) : (kSign - 1);
  // fp32 bits of the smallest normal of the target format.
  static constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  static constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;

  CF_HOST_DEVICE static constexpr uint32_t encode(uint32_t x, bool saturate) {
    const uint32_t sign = (x >> 31) ? kSign : 0;
    const uint32_t a = x & 0x7FFFFFFFu;
    const bool is_nan = a > 0x7F800000u;
    // Normal target: rebias the exponent, round the mantissa; a carry moves the binade up.
    const uint32_t normal = rne_shift(a - kRebias, kShift);
    // Subnormal target: the implicit one made explicit, shifted to the fixed quantum.
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7FFFFFu) | (e ? 0x800000u : 0u);
    const int32_t sub_shift = (151 - kBias - kManBits) - static_cast<int32_t>(e ? e : 1);
    // The clamp only keeps the unused lane's shift defined; out-of-range shifts give 0.
    const uint32_t safe_shift = static_cast<uint32_t>(sub_shift < 1    ? 1
                                                      : sub_shift > 24 ? 24
                                                                       : sub_shift);
    const uint32_t sub = sub_shift >= 25 ? 0u : rne_shift(m, safe_shift);
    uint32_t mag = a >= kMinNormalBits ? normal : sub;
    const uint32_t overflow = saturate ? kMaxCode : (kHasInf ? kInfCode : kNanCode);
    mag = mag > kMaxCode ? overflow : mag;
    uint32_t nan;
    if constexpr (kHasInf) {
      nan = kNanCode | ((a & 0x7FFFFFu) >> kShift);
    } else {
      nan = kNanCode;
    }
    return sign | (is_nan ? nan : mag);
  }
};

using F16 = Narrow<5, 10, 15, true>;
using BF16 = Narrow<8, 7, 127, true>;

// BF16::encode(x, false) with its branches folded, for the bulk converter (the general form
// did not vectorize well: 0.73 ns per element on the AMX Xeon, 6 ms for the 8 Mi outputs of
// an alltoall_quant_matmul): bf16 keeps fp32's exponent range, so every non-NaN input is one
// round-to-nearest-even shift by 16, subnormals and the carry into infinity included; a NaN
// keeps its top payload bits and is made quiet. The bulk tests compare it with the
// reference over every sign/exponent/top-mantissa pattern.
CF_HOST_DEVICE constexpr uint32_t bf16_encode(uint32_t x) {
  const uint32_t a = x & 0x7FFFFFFFu;
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t nan = 0x7FC0u | ((a & 0x7FFFFFu) >> 16);
  return sign | (a > 0x7F800000u ? nan : rne_shift(a, 16));
}
#ifndef __CUDACC__  // nvcc does not evaluate the template's encode at compile time
static_assert(bf16_encode(0x3F808000u) == BF16::encode(0x3F808000u, false));  // tie to even
static_assert(bf16_encode(0x7F7FFFFFu) == BF16::encode(0x7F7FFFFFu, false));  // to infinity
static_assert(bf16_encode(0x00018000u) == BF16::encode(0x00018000u, false));  // subnormal
static_assert(bf16_encode(0xFF812345u) == BF16::encode(0xFF812345u, false));  // NaN
#endif
using E4M3FN = Narrow<4, 3, 7, false>;
using E5M2 = Narrow<5, 2, 15, true>;

}  // namespace commfuse::fast
