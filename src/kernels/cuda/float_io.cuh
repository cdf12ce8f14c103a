// Device helpers the float kernels share: an element of a float32 / float16 / bfloat16
// array widened exactly to fp32, and an fp32 value stored to one with one rounding (RNE, the
// CPU's encoder, core/narrow_float.hpp).
#pragma once

#include <cuda_fp16.h>

#include <commfuse/commfuse.hpp>

#include <cstdint>

#include "core/narrow_float.hpp"

namespace commfuse::kernels::cuda {

__device__ inline float load_float(const void* p, DType t, int64_t i) {
  if (t == DType::kFloat32) return static_cast<const float*>(p)[i];
  const uint16_t b = static_cast<const uint16_t*>(p)[i];
  if (t == DType::kBFloat16) return __uint_as_float(uint32_t{b} << 16);
  return __half2float(__ushort_as_half(b));  // exact: every fp16 is an fp32
}

__device__ inline void store_float(void* p, DType t, int64_t i, float y) {
  if (t == DType::kFloat32) {
    static_cast<float*>(p)[i] = y;
    return;
  }
  const uint32_t x = __float_as_uint(y);
  static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(
      t == DType::kBFloat16 ? fast::BF16::encode(x, false) : fast::F16::encode(x, false));
}

}  // namespace commfuse::kernels::cuda
