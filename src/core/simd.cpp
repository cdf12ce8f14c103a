// The build-flag probe of core/simd.hpp (multiply_add_as_built).
#include "core/simd.hpp"

namespace commfuse::simd {

#if defined(__x86_64__) && defined(__GNUC__)
// noinline: the probe must be this target's code, not the caller's.
__attribute__((target("avx2,fma"), noinline)) static float multiply_add_fma_target(float a, float b,
                                                                                   float c) {
  return a * b + c;
}
#endif

float multiply_add_as_built(float a, float b, float c) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu::detected_features().avx2 && cpu::detected_features().fma)
    return multiply_add_fma_target(a, b, c);
#endif
  return a * b + c;
}

}  // namespace commfuse::simd
