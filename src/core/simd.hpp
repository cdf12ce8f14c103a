// Array loops written once and compiled for AVX2 and for baseline x86-64 (CF_SIMD_KERNEL),
// or also for AVX-512 F + BW (CF_SIMD_KERNEL_AVX512), with the copy chosen at run time from
// cpu::use_avx512() / use_avx2(): the CPU's features capped by COMMFUSE_MAX_CPU_ISA, so a
// capped run exercises the narrower loops on any machine (GCC's target_clones, used before,
// choose at load time from the CPU alone and ignore the cap).
//
//   CF_SIMD_KERNEL(void, add_f32, (float* acc, const float* x, size_t n), (acc, x, n)) {
//     for (size_t i = 0; i < n; ++i) acc[i] += x[i];
//   }
//
// defines add_f32 (the dispatcher, with the linkage of where it stands) over static copies
// of the body. The body is plain C++ with no intrinsics, so every copy computes the same
// bits; only the vector width differs. That needs -ffp-contract=off (src/CMakeLists.txt):
// the AVX-512 copy may use FMA, and GCC's default would fuse a*b + c into one rounding
// where the other copies round twice.
//
// The AVX-512 copy is opt-in, loop by loop, where it measured faster: GCC 12 left some
// loops scalar in it (a2aq::mul_abs_max, then of 16 lanes: 16.4 against the AVX2 copy's
// 11.2 us per 16 Ki floats on the AMX Xeon), made table lookups 16-lane gathers (1 Mi e4m3
// codes: 328 against 228 us), and memory-bound loops (fp32 sums, widening) gained nothing. The
// encoders to bf16 / fp8 / HiF8 / E8M0, per-token quantization, bf16 sums and the int epilogue rows
// gained 1.1-2.1x (docs/architecture.md).
#pragma once

#include <cstddef>

#include "core/cpu_features.hpp"

#if defined(__GNUC__)
#define CF_SIMD_INLINE inline __attribute__((always_inline))
#else
#define CF_SIMD_INLINE inline
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#define CF_SIMD_TARGET_AVX2 __attribute__((target("avx2")))
#define CF_SIMD_TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512bw")))
#define CF_SIMD_COPIES_2(ret, name, params, args)          \
  static CF_SIMD_INLINE ret name##_simd_body params;       \
  static CF_SIMD_TARGET_AVX2 ret name##_simd_avx2 params { \
    return name##_simd_body args;                          \
  }                                                        \
  static ret name##_simd_base params {                     \
    return name##_simd_body args;                          \
  }
#define CF_SIMD_KERNEL(ret, name, params, args)                                         \
  CF_SIMD_COPIES_2(ret, name, params, args)                                             \
  ret name params {                                                                     \
    return ::commfuse::cpu::use_avx2() ? name##_simd_avx2 args : name##_simd_base args; \
  }                                                                                     \
  static CF_SIMD_INLINE ret name##_simd_body params
#define CF_SIMD_KERNEL_AVX512(ret, name, params, args)                                  \
  CF_SIMD_COPIES_2(ret, name, params, args)                                             \
  static CF_SIMD_TARGET_AVX512 ret name##_simd_avx512 params {                          \
    return name##_simd_body args;                                                       \
  }                                                                                     \
  ret name params {                                                                     \
    if (::commfuse::cpu::use_avx512()) return name##_simd_avx512 args;                  \
    return ::commfuse::cpu::use_avx2() ? name##_simd_avx2 args : name##_simd_base args; \
  }                                                                                     \
  static CF_SIMD_INLINE ret name##_simd_body params
#else
#define CF_SIMD_KERNEL(ret, name, params, args) ret name params
#define CF_SIMD_KERNEL_AVX512(ret, name, params, args) ret name params
#endif

namespace commfuse::simd {

// IEEE's default floating-point mode for the vector and scalar float arithmetic of its scope,
// whatever the thread set, restored after: round to nearest, ties to even, and subnormals
// kept (no flush-to-zero, no denormals-are-zero). Loops that round with std::nearbyint (which
// vectorizes; __builtin_roundevenf does not, in GCC 12) follow MXCSR, so a host program's
// fesetround(FE_UPWARD) turned 2.5 into 3; and torch.set_flush_denormal(True) (FTZ + DAZ)
// turned an MX scale of 2^-127 into 0 (SPEC §1, §3: exact functions of the input bits). One
// MXCSR read per scope, a write only where another mode was set.
class StandardFloatMode {
 public:
  StandardFloatMode();
  ~StandardFloatMode();
  StandardFloatMode(const StandardFloatMode&) = delete;
  StandardFloatMode& operator=(const StandardFloatMode&) = delete;

 private:
  unsigned saved_ = 0;
  bool changed_ = false;
};

// a * b + c as the library compiles it for a target with FMA (AVX2 + FMA), where the CPU has
// one, else in baseline code: the product rounded, then the sum, unless the build lets the
// compiler contract them into one FMA (it must not: -ffp-contract=off, above). For the test
// that guards that flag on any FMA machine, capped or not.
float multiply_add_as_built(float a, float b, float c);

// The largest abs_at(i) over i in [0, n), 0 if none is larger; abs_at gives a value >= 0 or
// a NaN, which compares false and is skipped. kLanes running maxima combined at the end: the
// same value as one running maximum (a maximum does not depend on the order), but GCC
// vectorizes independent lanes, where it keeps one running `a > m ? a : m` scalar for want
// of -ffinite-math-only (1 ns per element on the AMX Xeon). 32 lanes, not 16: with 16, each
// vector register's maximum was one dependent chain (4096 floats: 0.67 against 0.16 us, the
// loop built for AVX2 or for AVX-512 alike). abs_at is called once for each i, in
// ascending order (mul_abs_max scales v[i] in it). Inlined into each copy of a
// CF_SIMD_KERNEL, whose ISA it takes.
template <typename AbsAt>
CF_SIMD_INLINE float lane_max(size_t n, AbsAt abs_at) {
  constexpr size_t kLanes = 32;
  float lane[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) {
      const float a = abs_at(i + l);
      lane[l] = a > lane[l] ? a : lane[l];
    }
  float m = 0.0f;
  for (; i < n; ++i) {
    const float a = abs_at(i);
    m = a > m ? a : m;
  }
  for (const float a : lane) m = a > m ? a : m;
  return m;
}

}  // namespace commfuse::simd
