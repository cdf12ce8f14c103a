#include "ops/common/epilogue.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/reduce.hpp"

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
    for (int64_t r = 0; r < rows; ++r)
      kernels::cpu::add_f32(acc + r * n, b, static_cast<size_t>(n));
  }
  if (dst_dtype == DType::kFloat32)
    std::memcpy(dst, acc, count * sizeof(float));
  else
    convert(acc, DType::kFloat32, dst, dst_dtype, count);
}

void sum_bias_round(const float* const* parts, int n_parts, int64_t rows, int64_t n,
                    const float* bias32, void* dst, DType dst_dtype) {
  // Blocks of a row on the stack, summed by the SIMD add of the collectives' reduce_sum: a
  // thread_local row buffer (a __tls_get_addr call from a shared library) and scalar loops
  // cost a tiny matmul_reduce_scatter as much as its whole reduction.
  constexpr int64_t kBlock = 1024;  // fp32 accumulator block: stays in L1
  alignas(64) float block[kBlock];
  const size_t out_es = dtype_storage_bytes(dst_dtype, 1);
  auto* out = static_cast<uint8_t*>(dst);
  // One block = as many whole (dense) rows as fit: the sum is elementwise, so a narrow
  // partial's rows go through each pass together instead of paying three calls a row
  // (matmul_reduce_scatter 4096×4096×64 over TCP W = 2: 2048 rows of 64 took 84 us to
  // reduce a row at a time, AMX Xeon). The same adds in the same order: the same bits.
  if (n > 0 && n <= kBlock) {
    const int64_t block_rows = kBlock / n;
    for (int64_t r = 0; r < rows; r += block_rows) {
      const int64_t nr = std::min(block_rows, rows - r);
      const int64_t at = r * n;
      const auto len = static_cast<size_t>(nr * n);
      float* acc = dst_dtype == DType::kFloat32 ? static_cast<float*>(dst) + at : block;
      std::memcpy(acc, parts[0] + at, len * sizeof(float));
      for (int q = 1; q < n_parts; ++q) kernels::cpu::add_f32(acc, parts[q] + at, len);
      if (bias32 != nullptr)
        for (int64_t i = 0; i < nr; ++i)
          kernels::cpu::add_f32(acc + i * n, bias32, static_cast<size_t>(n));
      if (dst_dtype != DType::kFloat32)
        convert(acc, DType::kFloat32, out + static_cast<size_t>(at) * out_es, dst_dtype, len);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; c += kBlock) {
      const int64_t at = r * n + c;
      const auto len = static_cast<size_t>(std::min(kBlock, n - c));
      float* acc = dst_dtype == DType::kFloat32 ? static_cast<float*>(dst) + at : block;
      std::memcpy(acc, parts[0] + at, len * sizeof(float));
      for (int q = 1; q < n_parts; ++q) kernels::cpu::add_f32(acc, parts[q] + at, len);
      if (bias32 != nullptr) kernels::cpu::add_f32(acc, bias32 + c, len);
      if (dst_dtype != DType::kFloat32)
        convert(acc, DType::kFloat32, out + static_cast<size_t>(at) * out_es, dst_dtype, len);
    }
  }
}

void widen_bias(const BiasArg& bias, int64_t n, float* bias32) {
  if (bias.data == nullptr) return;
  convert(bias.data, bias.dtype, bias32, DType::kFloat32, static_cast<size_t>(n));
}

}  // namespace commfuse::ops
