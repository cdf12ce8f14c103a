// Helpers shared by the unit tests: bit views and the library's conversions one value
// at a time (through the public bulk entry point, so tests exercise what users call).
#pragma once

#include <commfuse/commfuse.hpp>

#include <bit>
#include <cmath>
#include <cstdint>

namespace cftest {

inline uint32_t bits(float x) {
  return std::bit_cast<uint32_t>(x);
}
inline float from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

template <typename Code>
Code encode(float x, commfuse::DType t, bool saturate = false) {
  Code c{};
  commfuse::convert(&x, commfuse::DType::kFloat32, &c, t, 1, saturate);
  return c;
}

template <typename Code>
float decode(Code c, commfuse::DType t) {
  float x = 0;
  commfuse::convert(&c, t, &x, commfuse::DType::kFloat32, 1, false);
  return x;
}

inline bool same_bits(float a, float b) {
  return bits(a) == bits(b);
}

}  // namespace cftest
