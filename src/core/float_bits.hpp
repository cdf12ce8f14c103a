// Bit views of floats: every conversion in commfuse is an exact function of input bits.
#pragma once

#include <bit>
#include <cstdint>

namespace commfuse::detail {

constexpr uint32_t f32_bits(float x) {
  return std::bit_cast<uint32_t>(x);
}
constexpr float f32_from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

}  // namespace commfuse::detail
