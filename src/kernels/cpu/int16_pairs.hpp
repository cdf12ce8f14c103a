// vpmaddwd's operands, shared by the exact int8 kernels without VNNI (madd16_gemm.cpp,
// small_m_int_gemm.cpp): two k at a time, as int16 pairs (x[t], x[t+1]) whose product with
// another pair is summed into one int32 (at most 2 * 2^14: exact).
#pragma once

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace commfuse::kernels::cpu {

// (lo, hi) as one int32: lo in the low int16, hi in the high one (a's side: broadcast).
inline uint32_t int16_pair(int8_t lo, int8_t hi) {
  return static_cast<uint32_t>(static_cast<uint16_t>(static_cast<int16_t>(hi))) << 16 |
         static_cast<uint16_t>(static_cast<int16_t>(lo));
}

#if defined(__x86_64__) && defined(__GNUC__)
// b's side: rows r0 and r1 (k = t and t + 1), 16 columns: their bytes interleaved, then
// widened, give the (r0[j], r1[j]) int16 pairs in column order, columns 0-7 in lo and 8-15
// in hi.
__attribute__((target("avx2"), always_inline)) inline void widen_pairs_avx2(const __m128i r0,
                                                                            const __m128i r1,
                                                                            __m256i& lo,
                                                                            __m256i& hi) {
  lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, r1));
  hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, r1));
}
#endif

}  // namespace commfuse::kernels::cpu
