#include "kernels/cuda/decode.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "core/code_values.hpp"
#include "core/error.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct Params {
  uint16_t lut[256];  // code -> bf16 bits
  DecodeBf16Desc d;
};

__global__ void __launch_bounds__(kThreads) decode_kernel(const __grid_constant__ Params p) {
  __shared__ uint16_t lut[256];
  lut[threadIdx.x] = p.lut[threadIdx.x];
  __syncthreads();
  const DecodeBf16Desc& d = p.d;
  const auto* src = static_cast<const uint8_t*>(d.src);
  const int64_t total = d.rows * d.cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / d.cols, j = e % d.cols;
    d.dst[i * d.ld_dst + j] = lut[src[i * d.ld_src + j]];
  }
}

}  // namespace

void decode_to_bf16(const DecodeBf16Desc& d, void* stream) {
  const char* fn = "decode_to_bf16 (CUDA)";
  const DType t = d.code_dtype;
  CF_CHECK_ARG(t == DType::kHiFloat8 || t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2 ||
                   t == DType::kInt8,
               fn, ": code_dtype ", dtype_name(t),
               " is not hifloat8, float8_e4m3fn, float8_e5m2 or int8");
  CF_CHECK_ARG(d.rows >= 0 && d.cols > 0, fn, ": rows=", d.rows, " cols=", d.cols,
               " (rows >= 0, cols > 0)");
  CF_CHECK_ARG(d.ld_src >= d.cols && d.ld_dst >= d.cols, fn, ": ld_src=", d.ld_src,
               " and ld_dst=", d.ld_dst, " must be at least cols=", d.cols);
  CF_CHECK_NOTNULL(d.src, fn, ": src is null");
  CF_CHECK_NOTNULL(d.dst, fn, ": dst is null");
  CF_CHECK_ARG(aligned(d.dst, 2), fn, ": dst is not 2-byte aligned");
  if (d.rows == 0) return;
  require_device(fn);
  Params p{};
  convert(code_values(t), DType::kFloat32, p.lut, DType::kBFloat16, 256);  // exact
  p.d = d;
  const int64_t total = d.rows * d.cols;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  decode_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch(fn);
}

}  // namespace commfuse::kernels::cuda
