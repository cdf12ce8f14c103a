// SPEC §1 INT4 on the device: two's complement in [-8, 7], two per byte, element 2j in the
// low nibble of byte j (the CPU's unpack_int4).
#pragma once

#include <cstdint>

namespace commfuse::kernels::cuda {

__device__ inline int8_t int4_low(uint8_t b) {
  return static_cast<int8_t>(static_cast<int8_t>(b << 4) >> 4);
}
__device__ inline int8_t int4_high(uint8_t b) {
  return static_cast<int8_t>(static_cast<int8_t>(b) >> 4);
}
// Element `at` of a dense int4 array.
__device__ inline int8_t int4_at(const uint8_t* p, int64_t at) {
  const uint8_t b = p[at / 2];
  return at % 2 == 0 ? int4_low(b) : int4_high(b);
}

}  // namespace commfuse::kernels::cuda
