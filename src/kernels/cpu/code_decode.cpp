#include "kernels/cpu/code_decode.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/dequant.hpp"

namespace commfuse::kernels::cpu {
namespace {

// The bf16 bits of every code, from the exact fp32 table.
struct Bf16Tables {
  alignas(64) std::array<uint16_t, 256> e4m3, e5m2, hif8;
};

const uint16_t* bf16_table(DType t) {
  static const Bf16Tables tables = [] {
    Bf16Tables tb{};
    auto fill = [](std::array<uint16_t, 256>& out, DType dt) {
      const float* v = code_values(dt);
      for (size_t c = 0; c < 256; ++c) {
        uint32_t bits;
        std::memcpy(&bits, &v[c], 4);
        out[c] = static_cast<uint16_t>(bits >> 16);
      }
    };
    fill(tb.e4m3, DType::kFloat8E4M3FN);
    fill(tb.e5m2, DType::kFloat8E5M2);
    fill(tb.hif8, DType::kHiFloat8);
    return tb;
  }();
  return t == DType::kFloat8E4M3FN ? tables.e4m3.data()
         : t == DType::kFloat8E5M2 ? tables.e5m2.data()
                                   : tables.hif8.data();
}

// Whether every negative code decodes to its magnitude's entry with the sign bit set (-0 and
// a NaN's sign included): then a lookup needs only the 128 magnitudes. Checked on the
// table, not assumed per format.
bool sign_symmetric(const uint16_t* tab) {
  for (size_t c = 128; c < 256; ++c)
    if (tab[c] != (tab[c - 128] | 0x8000u)) return false;
  return true;
}

void table_bf16(const uint16_t* tab, const uint8_t* src, uint16_t* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = tab[src[i]];
}
void table_f32(const float* tab, const uint8_t* src, float* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = tab[src[i]];
}
void table_decode(const uint16_t* tab, const float* tab32, const uint8_t* src, bool to_bf16,
                  void* dst, size_t count) {
  if (to_bf16)
    table_bf16(tab, src, static_cast<uint16_t*>(dst), count);
  else
    table_f32(tab32, src, static_cast<float*>(dst), count);
}

enum class Path { kTable, kAvx2F16c, kAvx512Bw };

Path path_for(DType t, bool to_bf16) {
  const commfuse::cpu::Features& f = commfuse::cpu::features();
  if (f.avx512f && f.avx512bw) return Path::kAvx512Bw;
  if (!to_bf16 && t != DType::kHiFloat8 && commfuse::cpu::use_f16c()) return Path::kAvx2F16c;
  return Path::kTable;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define CF_AVX512BW __attribute__((target("avx512f,avx512bw")))
// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512 conversion
// intrinsics (_mm512_undefined_*) as maybe-uninitialized: a header false positive. (Clang
// has no such warning group and would warn about the pragma itself.)
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 32 codes (zero-extended to words) -> their 16-bit table entries. vpermi2w looks up 64
// entries by the index's low 6 bits; bits 6 and 7 choose among the four quarter tables.
struct Lut512 {
  __m512i t[8];
};
CF_AVX512BW inline Lut512 load_lut(const uint16_t* tab) {
  Lut512 l;
  for (int q = 0; q < 8; ++q) l.t[q] = _mm512_loadu_si512(tab + 32 * q);
  return l;
}
CF_AVX512BW inline __m512i lookup32(const Lut512& l, __m512i idx) {
  const __m512i q0 = _mm512_permutex2var_epi16(l.t[0], idx, l.t[1]);
  const __m512i q1 = _mm512_permutex2var_epi16(l.t[2], idx, l.t[3]);
  const __m512i q2 = _mm512_permutex2var_epi16(l.t[4], idx, l.t[5]);
  const __m512i q3 = _mm512_permutex2var_epi16(l.t[6], idx, l.t[7]);
  const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x40));
  const __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x80));
  const __m512i lo = _mm512_mask_blend_epi16(b6, q0, q1);
  const __m512i hi = _mm512_mask_blend_epi16(b6, q2, q3);
  return _mm512_mask_blend_epi16(b7, lo, hi);
}

// The same for a sign-symmetric table: the magnitude's entry (two of the four lookups)
// with the code's sign moved to bit 15.
CF_AVX512BW inline __m512i lookup32_signed(const Lut512& l, __m512i idx) {
  const __m512i q0 = _mm512_permutex2var_epi16(l.t[0], idx, l.t[1]);
  const __m512i q1 = _mm512_permutex2var_epi16(l.t[2], idx, l.t[3]);
  const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x40));
  const __m512i sign = _mm512_slli_epi16(_mm512_and_si512(idx, _mm512_set1_epi16(0x80)), 8);
  return _mm512_or_si512(_mm512_mask_blend_epi16(b6, q0, q1), sign);
}

// 32 codes from src, zero-extended to words; streamed verbatim to copy as well where it is
// set (32-byte aligned: decode_codes aligns it).
CF_AVX512BW inline __m512i load32(const uint8_t* src, uint8_t* copy) {
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  if (copy != nullptr) _mm256_stream_si256(reinterpret_cast<__m256i*>(copy), c);
  return _mm512_cvtepu8_epi16(c);
}
CF_AVX512BW inline uint8_t* at(uint8_t* copy, size_t i) {
  return copy != nullptr ? copy + i : nullptr;
}

// 16 Mi e4m3 codes, AMX Xeon: about 3 ms with four lookups, half that with two.
CF_AVX512BW void avx512_bf16(const uint16_t* tab, const uint8_t* src, uint16_t* dst, size_t count,
                             uint8_t* copy) {
  const Lut512 l = load_lut(tab);
  const bool symmetric = sign_symmetric(tab);
  size_t i = 0;
  if (symmetric)
    for (; i + 32 <= count; i += 32)
      _mm512_storeu_si512(dst + i, lookup32_signed(l, load32(src + i, at(copy, i))));
  for (; i + 32 <= count; i += 32)
    _mm512_storeu_si512(dst + i, lookup32(l, load32(src + i, at(copy, i))));
  table_bf16(tab, src + i, dst + i, count - i);
  if (copy != nullptr) std::memcpy(copy + i, src + i, count - i);
}

// fp32 = the bf16 bits shifted up (exact: the table entries are the fp32 values' top halves).
CF_AVX512BW void avx512_f32(const uint16_t* tab, const float* tab32, const uint8_t* src, float* dst,
                            size_t count, uint8_t* copy) {
  const Lut512 l = load_lut(tab);
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512i w = lookup32(l, load32(src + i, at(copy, i)));
    const __m512i lo = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(w)), 16);
    const __m512i hi =
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1)), 16);
    _mm512_storeu_si512(dst + i, lo);
    _mm512_storeu_si512(dst + i + 16, hi);
  }
  table_f32(tab32, src + i, dst + i, count - i);
  if (copy != nullptr) std::memcpy(copy + i, src + i, count - i);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// 8 codes -> fp32 through fp16. e5m2 is fp16's upper byte; e4m3fn's exponent and mantissa
// sit in fp16's low exponent bits with a bias 8 smaller, so the fp16 value times 2^8 is the
// code's value, normals and subnormals alike (both scale by the same power of two). Codes
// that are NaN (e4m3fn: |c| = 0x7F; e5m2: |c| > 0x7C, infinities are exact) come from the
// table, so every bit matches it.
template <bool kE4m3>
__attribute__((target("avx2,f16c"))) void avx2_f32(const float* tab32, const uint8_t* src,
                                                   float* dst, size_t count) {
  const __m128i mag_mask = _mm_set1_epi16(0x7F);
  const __m128i sign_mask = _mm_set1_epi16(0x80);
  const __m128i nan_from = _mm_set1_epi16(kE4m3 ? 0x7E : 0x7C);  // |c| > this: NaN
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i)));
    const __m128i mag = _mm_and_si128(c, mag_mask);
    __m128i h;
    if constexpr (kE4m3)
      h = _mm_or_si128(_mm_slli_epi16(mag, 7), _mm_slli_epi16(_mm_and_si128(c, sign_mask), 8));
    else
      h = _mm_slli_epi16(c, 8);
    // NaN lanes are zeroed before the conversion (an e5m2 signalling NaN would raise the
    // invalid flag, which the table does not), then taken from the table.
    const __m128i nan16 = _mm_cmpgt_epi16(mag, nan_from);
    h = _mm_andnot_si128(nan16, h);
    __m256 v = _mm256_cvtph_ps(h);
    if constexpr (kE4m3) v = _mm256_mul_ps(v, _mm256_set1_ps(256.0f));
    if (_mm_movemask_epi8(nan16) != 0) {
      const __m256 nan32 = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan16));
      v = _mm256_mask_i32gather_ps(v, tab32, _mm256_cvtepu16_epi32(c), nan32, 4);
    }
    _mm256_storeu_ps(dst + i, v);
  }
  table_f32(tab32, src + i, dst + i, count - i);
}
#endif

}  // namespace

bool decodable_code(DType dtype) {
  return dtype == DType::kFloat8E4M3FN || dtype == DType::kFloat8E5M2 || dtype == DType::kHiFloat8;
}

const char* decode_codes_path(DType dtype, bool to_bf16) {
  switch (path_for(dtype, to_bf16)) {
    case Path::kAvx512Bw:
      return "avx512bw";
    case Path::kAvx2F16c:
      return "avx2+f16c";
    case Path::kTable:
      break;
  }
  return "table";
}

void decode_codes(const uint8_t* src, DType dtype, bool to_bf16, void* dst, size_t count,
                  uint8_t* copy) {
  CF_ASSERT(decodable_code(dtype));
  const uint16_t* tab = bf16_table(dtype);
  const float* tab32 = code_values(dtype);
  const Path path = path_for(dtype, to_bf16);
  bool decoded = false;  // by a vector path; else the table
#if defined(__x86_64__) && defined(__GNUC__)
  if (path == Path::kAvx512Bw) {
    if (copy != nullptr) {
      // The codes before copy's first 32-byte boundary through the table, so that the
      // vector loop's streaming stores are aligned.
      const size_t head = std::min(count, (32 - (reinterpret_cast<uintptr_t>(copy) & 31)) & 31);
      table_decode(tab, tab32, src, to_bf16, dst, head);
      std::memcpy(copy, src, head);
      src += head;
      dst = static_cast<uint8_t*>(dst) + head * (to_bf16 ? 2 : 4);
      copy += head;
      count -= head;
    }
    if (to_bf16)
      avx512_bf16(tab, src, static_cast<uint16_t*>(dst), count, copy);
    else
      avx512_f32(tab, tab32, src, static_cast<float*>(dst), count, copy);
    if (copy != nullptr) _mm_sfence();  // the streamed codes are visible before the call returns
    return;
  }
  if (path == Path::kAvx2F16c) {
    if (dtype == DType::kFloat8E4M3FN)
      avx2_f32<true>(tab32, src, static_cast<float*>(dst), count);
    else
      avx2_f32<false>(tab32, src, static_cast<float*>(dst), count);
    decoded = true;
  }
#else
  (void)path;
#endif
  if (!decoded) table_decode(tab, tab32, src, to_bf16, dst, count);
  // Paths without a streaming loop: the codes copied from cache after their decode.
  if (copy != nullptr) copy_vector_loop(copy, src, count, true);
}

}  // namespace commfuse::kernels::cpu
