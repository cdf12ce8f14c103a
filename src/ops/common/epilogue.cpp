#include "ops/common/epilogue.hpp"

#include <cstring>
#include <memory>

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

void sum_bias_round(const float* const* parts, int n_parts, int64_t rows, int64_t n,
                    const float* bias32, void* dst, DType dst_dtype) {
  thread_local std::unique_ptr<float[]> row_buf;
  thread_local int64_t row_cap = 0;
  if (n > row_cap) {
    row_buf = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n));
    row_cap = n;
  }
  const size_t out_es = dtype_storage_bytes(dst_dtype, 1);
  for (int64_t r = 0; r < rows; ++r) {
    // One row at a time: the accumulator stays in L1 while every part streams through.
    float* acc = dst_dtype == DType::kFloat32 ? static_cast<float*>(dst) + r * n : row_buf.get();
    const float* p0 = parts[0] + r * n;
    for (int64_t j = 0; j < n; ++j) acc[j] = p0[j];
    for (int q = 1; q < n_parts; ++q) {
      const float* pq = parts[q] + r * n;
      for (int64_t j = 0; j < n; ++j) acc[j] += pq[j];
    }
    if (bias32 != nullptr)
      for (int64_t j = 0; j < n; ++j) acc[j] += bias32[j];
    if (dst_dtype != DType::kFloat32)
      convert(acc, DType::kFloat32,
              static_cast<uint8_t*>(dst) + static_cast<size_t>(r * n) * out_es, dst_dtype,
              static_cast<size_t>(n));
  }
}

void widen_bias(const BiasArg& bias, int64_t n, float* bias32) {
  if (bias.data == nullptr) return;
  convert(bias.data, bias.dtype, bias32, DType::kFloat32, static_cast<size_t>(n));
}

}  // namespace commfuse::ops
