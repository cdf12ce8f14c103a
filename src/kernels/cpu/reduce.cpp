#include "kernels/cpu/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/convert_fast.hpp"
#include "core/error.hpp"
#include "core/simd.hpp"

namespace commfuse::kernels::cpu {

CF_SIMD_KERNEL(void, add_f32, (float* acc, const float* x, size_t n), (acc, x, n)) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

namespace {

constexpr size_t kBlock = 1024;  // fp32 accumulator block: stays in L1

CF_SIMD_KERNEL_AVX512(void, add_bf16, (float* acc, const uint16_t* x, size_t n), (acc, x, n)) {
  for (size_t i = 0; i < n; ++i) acc[i] += std::bit_cast<float>(static_cast<uint32_t>(x[i]) << 16);
}

void load_f32(const void* src, DType t, size_t off, float* dst, size_t n) {
  commfuse::convert(static_cast<const uint8_t*>(src) + off * (dtype_bits(t) / 8), t, dst,
                    DType::kFloat32, n);
}

// float32: accumulate straight into dst (no widening needed), block by block so that a
// dst aliasing a src is read before it is written.
void reduce_f32(const void* const* src, int n_src, float* dst, size_t count) {
  float acc[kBlock];
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t n = std::min(kBlock, count - off);
    std::memcpy(acc, static_cast<const float*>(src[0]) + off, n * sizeof(float));
    for (int s = 1; s < n_src; ++s) add_f32(acc, static_cast<const float*>(src[s]) + off, n);
    std::memcpy(dst + off, acc, n * sizeof(float));
  }
}

void reduce_float(const void* const* src, int n_src, void* dst, size_t count, DType t) {
  if (t == DType::kFloat32) {
    reduce_f32(src, n_src, static_cast<float*>(dst), count);
    return;
  }
  float acc[kBlock];
  float tmp[kBlock];
  const size_t esize = static_cast<size_t>(dtype_bits(t) / 8);
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t n = std::min(kBlock, count - off);
    load_f32(src[0], t, off, acc, n);
    for (int s = 1; s < n_src; ++s) {
      if (t == DType::kFloat32) {
        add_f32(acc, static_cast<const float*>(src[s]) + off, n);
      } else if (t == DType::kBFloat16) {
        add_bf16(acc, static_cast<const uint16_t*>(src[s]) + off, n);
      } else {
        load_f32(src[s], t, off, tmp, n);
        add_f32(acc, tmp, n);
      }
    }
    commfuse::convert(acc, DType::kFloat32, static_cast<uint8_t*>(dst) + off * esize, t, n);
  }
}

template <typename T>
void reduce_int(const void* const* src, int n_src, void* dst, size_t count, int64_t lo,
                int64_t hi) {
  for (size_t i = 0; i < count; ++i) {
    int64_t sum = 0;
    for (int s = 0; s < n_src; ++s) sum += static_cast<const T*>(src[s])[i];
    static_cast<T*>(dst)[i] = static_cast<T>(std::clamp(sum, lo, hi));
  }
}

}  // namespace

bool reducible(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kInt8 || t == DType::kInt32;
}

const char* reducible_names() {
  return "float32, float16, bfloat16, int8, int32";
}

void reduce_sum(const void* const* src, int n_src, void* dst, size_t count, DType dtype) {
  CF_ASSERT(n_src >= 1);
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      reduce_float(src, n_src, dst, count, dtype);
      return;
    case DType::kInt8:
      reduce_int<int8_t>(src, n_src, dst, count, INT8_MIN, INT8_MAX);
      return;
    case DType::kInt32:
      reduce_int<int32_t>(src, n_src, dst, count, INT32_MIN, INT32_MAX);
      return;
    default:
      break;
  }
  detail::throw_status(Status::kParamInvalid,
                       detail::cat("reduce: dtype ", dtype_name(dtype), " cannot be summed (only ",
                                   reducible_names(), ")"));
}

}  // namespace commfuse::kernels::cpu
