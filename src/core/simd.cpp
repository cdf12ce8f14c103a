// The build-flag probe of core/simd.hpp (multiply_add_as_built), and its rounding-mode guard.
#include "core/simd.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#else
#include <cfenv>
#endif

namespace commfuse::simd {

#if defined(__x86_64__) && defined(__GNUC__)
// noinline: the probe must be this target's code, not the caller's.
__attribute__((target("avx2,fma"), noinline)) static float multiply_add_fma_target(float a, float b,
                                                                                   float c) {
  return a * b + c;
}
#endif

#if defined(__x86_64__) || defined(__i386__)
// MXCSR's rounding control (bits 13-14: 00 is round to nearest even), flush-to-zero (bit 15)
// and denormals-are-zero (bit 6). Read directly, since fegetround reads the x87 control
// word, which _MM_SET_ROUNDING_MODE leaves alone.
constexpr unsigned kModeBits = 0x6000 | 0x8000 | 0x0040;
StandardFloatMode::StandardFloatMode() : saved_(_mm_getcsr()), changed_((saved_ & kModeBits) != 0) {
  if (changed_) _mm_setcsr(saved_ & ~kModeBits);
}
StandardFloatMode::~StandardFloatMode() {
  if (changed_) _mm_setcsr(saved_);
}
#else  // rounding only: other architectures' flush-to-zero bits are left as they are
StandardFloatMode::StandardFloatMode()
    : saved_(static_cast<unsigned>(std::fegetround())), changed_(saved_ != FE_TONEAREST) {
  if (changed_) std::fesetround(FE_TONEAREST);
}
StandardFloatMode::~StandardFloatMode() {
  if (changed_) std::fesetround(static_cast<int>(saved_));
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
