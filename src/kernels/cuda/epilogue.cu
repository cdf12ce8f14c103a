#include "kernels/cuda/epilogue.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/narrow_float.hpp"
#include "kernels/cuda/float_io.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output element; the order of operations is the CPU kernel's, each step
// one IEEE rounding (__fmul_rn / __fadd_rn: never an FMA).
template <bool kIntAcc>
__global__ void __launch_bounds__(kThreads) epilogue_kernel(const EpilogueDesc d) {
  const int64_t total = d.m * d.n;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / d.n, j = e % d.n;
    const float sa = d.a_scale[d.a_per_row ? i : 0];
    const float sb = d.b_scale[d.b_per_column ? j : 0];
    const float s = __fmul_rn(sa, sb);
    float y;
    if constexpr (kIntAcc) {
      const int32_t acc = static_cast<const int32_t*>(d.acc)[i * d.ld_acc + j];
      y = d.bias_int != nullptr ? __fmul_rn(__ll2float_rn(int64_t{acc} + d.bias_int[j]), s)
                                : __fmul_rn(__int2float_rn(acc), s);
    } else {
      y = __fmul_rn(static_cast<const float*>(d.acc)[i * d.ld_acc + j], s);
    }
    if (d.bias32 != nullptr) y = __fadd_rn(y, load_float(d.bias32, d.bias32_dtype, j));
    store_float(d.out, d.out_dtype, i * d.ld_out + j, y);
  }
}

template <bool kSegments>
__global__ void __launch_bounds__(kThreads) token_epilogue_kernel(const TokenEpilogueDesc d) {
  const int64_t total = d.m * d.n;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / d.n, j = e % d.n;
    float y;
    if constexpr (kSegments) {
      y = __fmul_rn(__fmul_rn(__int2float_rn(d.acc[e]), d.token_scale[i * d.segments]),
                    d.x2_scale[j]);
      for (int s = 1; s < d.segments; ++s)
        y = __fadd_rn(y, __fmul_rn(__fmul_rn(__int2float_rn(d.acc[s * total + e]),
                                             d.token_scale[i * d.segments + s]),
                                   d.x2_scale[j]));
    } else {
      y = __fmul_rn(__fmul_rn(__int2float_rn(d.acc[e]), d.x2_scale[j]), d.token_scale[i]);
    }
    if (d.bias != nullptr) y = __fadd_rn(y, load_float(d.bias, d.bias_dtype, j));
    store_float(d.out, d.out_dtype, e, y);
  }
}

}  // namespace

void token_epilogue(const TokenEpilogueDesc& d, void* stream) {
  const char* fn = "token_epilogue (CUDA)";
  CF_CHECK_ARG(d.m >= 0 && d.n > 0, fn, ": m=", d.m, " n=", d.n, " (m >= 0, n > 0)");
  CF_CHECK_ARG(d.segments >= 0, fn, ": segments=", d.segments, " is negative");
  CF_CHECK_ARG(float_dtype(d.out_dtype), fn, ": out_dtype ", dtype_name(d.out_dtype),
               " is not float32, float16 or bfloat16");
  CF_CHECK_ARG(d.bias == nullptr || float_dtype(d.bias_dtype), fn, ": bias_dtype ",
               dtype_name(d.bias_dtype), " is not float32, float16 or bfloat16");
  CF_CHECK_NOTNULL(d.acc, fn, ": acc is null");
  CF_CHECK_NOTNULL(d.token_scale, fn, ": token_scale is null");
  CF_CHECK_NOTNULL(d.x2_scale, fn, ": x2_scale is null");
  CF_CHECK_NOTNULL(d.out, fn, ": out is null");
  CF_CHECK_ARG(aligned(d.acc, 4) && aligned(d.token_scale, 4) && aligned(d.x2_scale, 4), fn,
               ": acc and the scales must be 4-byte aligned");
  CF_CHECK_ARG(aligned(d.bias, dtype_storage_bytes(d.bias_dtype, 1)), fn,
               ": bias is not aligned to its ", dtype_name(d.bias_dtype), " elements");
  CF_CHECK_ARG(aligned(d.out, dtype_storage_bytes(d.out_dtype, 1)), fn,
               ": out is not aligned to its ", dtype_name(d.out_dtype), " elements");
  if (d.m == 0) return;
  require_device(fn);
  const int64_t total = d.m * d.n;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  auto s = static_cast<cudaStream_t>(stream);
  if (d.segments > 0)
    token_epilogue_kernel<true><<<blocks, kThreads, 0, s>>>(d);
  else
    token_epilogue_kernel<false><<<blocks, kThreads, 0, s>>>(d);
  check_launch(fn);
}

void quant_epilogue(const EpilogueDesc& d, void* stream) {
  const char* fn = "quant_epilogue (CUDA)";
  CF_CHECK_ARG(d.m >= 0 && d.n > 0, fn, ": m=", d.m, " n=", d.n, " (m >= 0, n > 0)");
  CF_CHECK_ARG(d.acc_dtype == DType::kInt32 || d.acc_dtype == DType::kFloat32, fn, ": acc_dtype ",
               dtype_name(d.acc_dtype), " is not int32 or float32");
  CF_CHECK_ARG(d.bias_int == nullptr || d.acc_dtype == DType::kInt32, fn,
               ": an int32 bias needs int32 accumulators (A8W8)");
  CF_CHECK_ARG(d.out_dtype == DType::kFloat32 || d.out_dtype == DType::kFloat16 ||
                   d.out_dtype == DType::kBFloat16,
               fn, ": out_dtype ", dtype_name(d.out_dtype), " is not float32, float16 or bfloat16");
  CF_CHECK_ARG(d.ld_acc >= d.n, fn, ": ld_acc=", d.ld_acc, " is below n=", d.n);
  CF_CHECK_ARG(d.ld_out >= d.n, fn, ": ld_out=", d.ld_out, " is below n=", d.n);
  CF_CHECK_NOTNULL(d.acc, fn, ": acc is null");
  CF_CHECK_NOTNULL(d.a_scale, fn, ": a_scale is null");
  CF_CHECK_NOTNULL(d.b_scale, fn, ": b_scale is null");
  CF_CHECK_NOTNULL(d.out, fn, ": out is null");
  CF_CHECK_ARG(
      aligned(d.acc, 4) && aligned(d.a_scale, 4) && aligned(d.b_scale, 4) && aligned(d.bias_int, 4),
      fn, ": acc, the scales and an int32 bias must be 4-byte aligned");
  CF_CHECK_ARG(aligned(d.out, dtype_storage_bytes(d.out_dtype, 1)), fn,
               ": out is not aligned to its ", dtype_name(d.out_dtype), " elements");
  CF_CHECK_ARG(d.bias32 == nullptr || float_dtype(d.bias32_dtype), fn, ": bias32_dtype ",
               dtype_name(d.bias32_dtype), " is not float32, float16 or bfloat16");
  CF_CHECK_ARG(aligned(d.bias32, dtype_storage_bytes(d.bias32_dtype, 1)), fn,
               ": bias32 is not aligned to its ", dtype_name(d.bias32_dtype), " elements");
  if (d.m == 0) return;
  require_device(fn);
  const int64_t total = d.m * d.n;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  auto s = static_cast<cudaStream_t>(stream);
  if (d.acc_dtype == DType::kInt32)
    epilogue_kernel<true><<<blocks, kThreads, 0, s>>>(d);
  else
    epilogue_kernel<false><<<blocks, kThreads, 0, s>>>(d);
  check_launch(fn);
}

}  // namespace commfuse::kernels::cuda
