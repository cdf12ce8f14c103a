#include "core/convert_fast.hpp"

#include <array>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "core/float_bits.hpp"
#include "core/narrow_float.hpp"
#include "core/simd.hpp"

namespace commfuse::fast {
namespace {

// HiFloat8 encoder (SPEC §1): the mantissa width W depends on |E|; rounding is half away
// from zero, done by adding half a unit and truncating. Every case is computed and the
// answer selected at the end, so the array loop vectorizes.
constexpr uint8_t hif8_encode(uint32_t x, bool saturate) {
  const uint32_t sign = (x >> 31) << 7;
  const uint32_t a = x & 0x7FFFFFFFu;
  const int32_t e0 = static_cast<int32_t>(a >> 23) - 127;
  const uint32_t man = a & 0x7FFFFFu;

  // Denormal band (|x| < 2^-15): powers of two 2^-22 .. 2^-16, 1.5*2^-16 carries to 2^-15.
  int32_t ed = e0 + (man >= 0x400000u ? 1 : 0);
  ed = ed < -22 ? -22 : ed;  // [2^-23, 2^-22) rounds up to 2^-22
  const uint32_t denormal = ed == -15 ? 0x7Eu : static_cast<uint32_t>(ed + 23) & 0x7Fu;

  // Normal band: W fixed by the exponent before rounding; a carry bumps the exponent.
  const uint32_t emag0 = static_cast<uint32_t>(e0 < 0 ? -e0 : e0);
  const uint32_t w = emag0 <= 3 ? 3u : emag0 <= 7 ? 2u : 1u;
  const uint32_t rounded = (man + (1u << (22 - w))) >> (23 - w);
  const uint32_t carry = rounded >> w;
  const uint32_t m = rounded & ((1u << w) - 1);
  const int32_t e = e0 + static_cast<int32_t>(carry);
  const uint32_t emag = static_cast<uint32_t>(e < 0 ? -e : e);
  const uint32_t eneg = e < 0 ? 1u : 0u;
  const uint32_t body = emag == 0   ? (0x08u | m)
                        : emag == 1 ? (0x10u | (eneg << 3) | m)
                        : emag <= 3 ? (0x20u | (eneg << 4) | ((emag - 2) << 3) | m)
                        : emag <= 7 ? (0x40u | (eneg << 4) | ((emag - 4) << 2) | m)
                                    : (0x60u | (eneg << 4) | (((emag - 8) & 7) << 1) | m);
  const bool overflow = e > 15 || (e == 15 && m != 0);

  const uint32_t magnitude = e0 < -15 ? denormal : overflow ? (saturate ? 0x6Eu : 0x6Fu) : body;
  const uint32_t code = a > 0x7F800000u   ? 0x80u  // NaN
                        : a < 0x34000000u ? 0x00u  // below 2^-23: the only zero (no -0)
                                          : sign | magnitude;
  return static_cast<uint8_t>(code);
}

// E8M0: nearest power of two, ties upward; see convert_ref.cpp for the rules.
constexpr uint8_t e8m0_encode(uint32_t x, bool saturate) {
  const uint32_t a = x & 0x7FFFFFFFu;
  const bool invalid = (x >> 31) != 0 || a == 0 || a > 0x7F800000u;
  const uint32_t e = a >> 23;
  const uint32_t man = a & 0x7FFFFFu;
  // fp32 subnormals lie between 2^-149 and 2^-126: only codes 0 (2^-127) and 1 (2^-126)
  // are near; the tie is 1.5 * 2^-127 = mantissa 0x600000.
  const uint32_t code = e == 0 ? (man >= 0x600000u ? 1u : 0u) : e + (man >= 0x400000u ? 1u : 0u);
  const uint32_t too_big = saturate ? 0xFEu : 0xFFu;
  return static_cast<uint8_t>(invalid ? 0xFFu : code > 254 ? too_big : code);
}

// ---- decoders ----

constexpr uint32_t f16_decode(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t e = (h >> 10) & 0x1F;
  const uint32_t m = h & 0x3FF;
  if (e == 0x1F) return sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u);
  if (e != 0) return sign | ((e + 112) << 23) | (m << 13);
  if (m == 0) return sign;
  // Subnormal m * 2^-24: normalise so the leading one becomes the implicit bit.
  const int lz = __builtin_clz(m) - 21;  // shifts to bring bit 9 .. 0 up to bit 10
  const uint32_t mn = (m << lz) & 0x3FF;
  return sign | (static_cast<uint32_t>(113 - lz) << 23) | (mn << 13);
}

// Decoders of the 8-bit formats as constexpr functions, used only to build the tables.
template <int kExpBits, int kManBits, int kBias, bool kHasInf>
constexpr uint32_t narrow_decode(uint32_t c) {
  constexpr uint32_t kExpMax = (1u << kExpBits) - 1;
  const uint32_t sign = (c >> (kExpBits + kManBits)) << 31;
  const uint32_t e = (c >> kManBits) & kExpMax;
  const uint32_t m = c & ((1u << kManBits) - 1);
  if (kHasInf && e == kExpMax)
    return sign | 0x7F800000u | (m << (23 - kManBits)) | (m ? 0x400000u : 0u);
  if (!kHasInf && e == kExpMax && m == (1u << kManBits) - 1) return sign | 0x7FC00000u;
  if (e != 0) return sign | ((e + 127 - kBias) << 23) | (m << (23 - kManBits));
  if (m == 0) return sign;
  int lz = 0;  // normalise the subnormal mantissa
  uint32_t mn = m;
  while ((mn & (1u << kManBits)) == 0) {
    mn <<= 1;
    ++lz;
  }
  return sign | (static_cast<uint32_t>(127 + 1 - kBias - lz) << 23) |
         ((mn & ((1u << kManBits) - 1)) << (23 - kManBits));
}

constexpr uint32_t pow2_bits(int e) {  // fp32 bits of 2^e, e in [-149, 127]
  return e >= -126 ? static_cast<uint32_t>(e + 127) << 23 : 1u << (e + 149);
}

constexpr uint32_t hif8_decode(uint32_t c) {
  const uint32_t sign = (c & 0x80) << 24;
  const uint32_t body = c & 0x7F;
  if (c == 0x00) return 0;
  if (c == 0x80) return 0x7FC00000u;
  if (body == 0x6F) return sign | 0x7F800000u;
  int d = 0, w = 0, dot_len = 0;
  if ((body >> 5) == 3) {
    d = 4;
    w = 1;
    dot_len = 2;
  } else if ((body >> 5) == 2) {
    d = 3;
    w = 2;
    dot_len = 2;
  } else if ((body >> 5) == 1) {
    d = 2;
    w = 3;
    dot_len = 2;
  } else if ((body >> 4) == 1) {
    d = 1;
    w = 3;
    dot_len = 3;
  } else if ((body >> 3) == 1) {
    d = 0;
    w = 3;
    dot_len = 4;
  } else
    return sign | pow2_bits(static_cast<int>(body & 7) - 23);
  const uint32_t rest = body & ((1u << (7 - dot_len)) - 1);
  const uint32_t m = rest & ((1u << w) - 1);
  int e = 0;
  if (d > 0) {
    const uint32_t ebits = rest >> w;
    const int mag = (1 << (d - 1)) + static_cast<int>(ebits & ((1u << (d - 1)) - 1));
    e = ((ebits >> (d - 1)) & 1) ? -mag : mag;
  }
  return sign | (static_cast<uint32_t>(e + 127) << 23) | (m << (23 - w));
}

constexpr uint32_t e8m0_decode(uint32_t c) {
  return c == 0xFF ? 0x7FC00000u : pow2_bits(static_cast<int>(c) - 127);
}

template <uint32_t (*kDecode)(uint32_t)>
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t c = 0; c < 256; ++c) t[c] = kDecode(c);
  return t;
}

constexpr auto kE4M3Table = make_table<narrow_decode<4, 3, 7, false>>();
constexpr auto kE5M2Table = make_table<narrow_decode<5, 2, 15, true>>();
constexpr auto kHiF8Table = make_table<hif8_decode>();
constexpr auto kE8M0Table = make_table<e8m0_decode>();

static_assert(kHiF8Table[0x08] == 0x3F800000u, "hif8 1.0");
static_assert(kHiF8Table[0x6E] == 0x47000000u, "hif8 32768");
static_assert(kE4M3Table[0x7E] == 0x43E00000u, "e4m3 448");

CF_SIMD_KERNEL(void, decode_table,
               (const uint32_t* table, const uint8_t* src, float* dst, size_t count),
               (table, src, dst, count)) {
  for (size_t i = 0; i < count; ++i) dst[i] = detail::f32_from_bits(table[src[i]]);
}

}  // namespace

uint16_t f32_to_f16_one(uint32_t x) {
  return static_cast<uint16_t>(F16::encode(x, false));
}
uint16_t f32_to_bf16_one(uint32_t x) {
  return static_cast<uint16_t>(BF16::encode(x, false));
}
uint8_t f32_to_e4m3fn_one(uint32_t x, bool sat) {
  return static_cast<uint8_t>(E4M3FN::encode(x, sat));
}
uint8_t f32_to_e5m2_one(uint32_t x, bool sat) {
  return static_cast<uint8_t>(E5M2::encode(x, sat));
}
uint8_t f32_to_hif8_one(uint32_t x, bool sat) {
  return hif8_encode(x, sat);
}
uint8_t f32_to_e8m0_one(uint32_t x, bool sat) {
  return e8m0_encode(x, sat);
}

namespace {

CF_SIMD_KERNEL(void, f16_to_f32_soft, (const uint16_t* src, float* dst, size_t count),
               (src, dst, count)) {
  for (size_t i = 0; i < count; ++i) dst[i] = detail::f32_from_bits(f16_decode(src[i]));
}
CF_SIMD_KERNEL(void, f32_to_f16_soft, (const float* src, uint16_t* dst, size_t count),
               (src, dst, count)) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = static_cast<uint16_t>(F16::encode(detail::f32_bits(src[i]), false));
}

#if defined(__x86_64__) && defined(__GNUC__)
// F16C (allowed from the avx2 ISA level, where present): one instruction converts 8 values, where
// the portable loop took about 11 instructions per value, and fp16 operands are widened on every
// call (x2 and the activations of the widened GEMM path: 43 % of the seed example's instructions).
// Decoding is exact either way (NaNs quieted as f16_decode does); encoding rounds to nearest
// even with overflow to infinity, as F16::encode(x, false). The bulk-vs-reference tests
// compare both with the scalar reference on every fp16 code and on random fp32 values.
__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* src, float* dst,
                                                          size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < count; ++i) dst[i] = detail::f32_from_bits(f16_decode(src[i]));
}
__attribute__((target("avx2,f16c"))) void f32_to_f16_f16c(const float* src, uint16_t* dst,
                                                          size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < count; ++i)
    dst[i] = static_cast<uint16_t>(F16::encode(detail::f32_bits(src[i]), false));
}
#endif

}  // namespace

void f16_to_f32(const uint16_t* src, float* dst, size_t count) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu::use_f16c()) return f16_to_f32_f16c(src, dst, count);
#endif
  f16_to_f32_soft(src, dst, count);
}
void f32_to_f16(const float* src, uint16_t* dst, size_t count) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu::use_f16c()) return f32_to_f16_f16c(src, dst, count);
#endif
  f32_to_f16_soft(src, dst, count);
}
CF_SIMD_KERNEL(void, bf16_to_f32, (const uint16_t* src, float* dst, size_t count),
               (src, dst, count)) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = detail::f32_from_bits(static_cast<uint32_t>(src[i]) << 16);
}
CF_SIMD_KERNEL_AVX512(void, f32_to_bf16, (const float* src, uint16_t* dst, size_t count),
                      (src, dst, count)) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = static_cast<uint16_t>(bf16_encode(detail::f32_bits(src[i])));
}
void e4m3fn_to_f32(const uint8_t* src, float* dst, size_t count) {
  decode_table(kE4M3Table.data(), src, dst, count);
}
CF_SIMD_KERNEL_AVX512(void, f32_to_e4m3fn, (const float* src, uint8_t* dst, size_t count, bool sat),
                      (src, dst, count, sat)) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = static_cast<uint8_t>(E4M3FN::encode(detail::f32_bits(src[i]), sat));
}
void e5m2_to_f32(const uint8_t* src, float* dst, size_t count) {
  decode_table(kE5M2Table.data(), src, dst, count);
}
CF_SIMD_KERNEL_AVX512(void, f32_to_e5m2, (const float* src, uint8_t* dst, size_t count, bool sat),
                      (src, dst, count, sat)) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = static_cast<uint8_t>(E5M2::encode(detail::f32_bits(src[i]), sat));
}
void hif8_to_f32(const uint8_t* src, float* dst, size_t count) {
  decode_table(kHiF8Table.data(), src, dst, count);
}
CF_SIMD_KERNEL_AVX512(void, f32_to_hif8, (const float* src, uint8_t* dst, size_t count, bool sat),
                      (src, dst, count, sat)) {
  for (size_t i = 0; i < count; ++i) dst[i] = hif8_encode(detail::f32_bits(src[i]), sat);
}
void e8m0_to_f32(const uint8_t* src, float* dst, size_t count) {
  decode_table(kE8M0Table.data(), src, dst, count);
}
CF_SIMD_KERNEL_AVX512(void, f32_to_e8m0, (const float* src, uint8_t* dst, size_t count, bool sat),
                      (src, dst, count, sat)) {
  for (size_t i = 0; i < count; ++i) dst[i] = e8m0_encode(detail::f32_bits(src[i]), sat);
}

}  // namespace commfuse::fast
