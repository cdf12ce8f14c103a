#include "ops/common/epilogue.hpp"

#include <cstring>

namespace commfuse::ops {

void add_bias_and_round(float* acc, int64_t rows, int64_t n, const BiasArg& bias, float* bias32,
                        void* dst, DType dst_dtype) {
  const size_t count = static_cast<size_t>(rows * n);
  if (count == 0) return;
  if (bias.data != nullptr) {
    const float* b = static_cast<const float*>(bias.data);
    if (bias.dtype != DType::kFloat32) {
      convert(bias.data, bias.dtype, bias32, DType::kFloat32, static_cast<size_t>(n));
      b = bias32;
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* row = acc + r * n;
      for (int64_t j = 0; j < n; ++j) row[j] += b[j];
    }
  }
  if (dst_dtype == DType::kFloat32)
    std::memcpy(dst, acc, count * sizeof(float));
  else
    convert(acc, DType::kFloat32, dst, dst_dtype, count);
}

}  // namespace commfuse::ops
