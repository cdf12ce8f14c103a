// Array loops written once and compiled twice, for AVX2 and for baseline x86-64, with the
// copy chosen at run time from cpu::use_avx2(): the CPU's features capped by
// COMMFUSE_MAX_CPU_ISA, so a capped run exercises the baseline loops on any machine (GCC's
// target_clones, used before, choose at load time from the CPU alone and ignore the cap).
//
//   CF_SIMD_KERNEL(void, add_f32, (float* acc, const float* x, size_t n), (acc, x, n)) {
//     for (size_t i = 0; i < n; ++i) acc[i] += x[i];
//   }
//
// defines add_f32 (the dispatcher, with the linkage of where it stands) over two static
// copies of the body. The body is plain C++ with no intrinsics, so both copies compute the
// same bits; only the vector width differs.
#pragma once

#include "core/cpu_features.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define CF_SIMD_TARGET_AVX2 __attribute__((target("avx2")))
#define CF_SIMD_INLINE inline __attribute__((always_inline))
#define CF_SIMD_KERNEL(ret, name, params, args)                                         \
  static CF_SIMD_INLINE ret name##_simd_body params;                                    \
  static CF_SIMD_TARGET_AVX2 ret name##_simd_avx2 params {                              \
    return name##_simd_body args;                                                       \
  }                                                                                     \
  static ret name##_simd_base params {                                                  \
    return name##_simd_body args;                                                       \
  }                                                                                     \
  ret name params {                                                                     \
    return ::commfuse::cpu::use_avx2() ? name##_simd_avx2 args : name##_simd_base args; \
  }                                                                                     \
  static CF_SIMD_INLINE ret name##_simd_body params
#else
#define CF_SIMD_KERNEL(ret, name, params, args) ret name params
#endif
