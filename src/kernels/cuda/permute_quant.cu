#include "kernels/cuda/permute_quant.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.hpp"
#include "kernels/cuda/int4.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct Params {
  const uint16_t* src[kMaxPermuteRanks];
  int ranks;
  int64_t src_row_stride, rows, h;
  const uint16_t* smooth;
  int qmax;
  int8_t* q;
  float* scales;
  uint16_t* permuted;
};

template <bool kBf16>
__device__ float widen(uint16_t bits) {
  if constexpr (kBf16)
    return __uint_as_float(uint32_t{bits} << 16);
  else
    return __half2float(__ushort_as_half(bits));  // exact
}

// v = f32(x) (* f32(smooth)): one fp32 multiply, as the CPU's mul_abs_max.
template <bool kBf16>
__device__ float value(const Params& p, int64_t row, int64_t c, bool keep) {
  const int64_t s = c / p.h, j = c % p.h;
  const uint16_t x = p.src[s][row * p.src_row_stride + j];
  if (keep) p.permuted[row * p.ranks * p.h + c] = x;
  const float v = widen<kBf16>(x);
  return p.smooth != nullptr ? __fmul_rn(v, widen<kBf16>(p.smooth[c])) : v;
}

// One block per permuted row: amax by a block reduction, then the codes.
template <bool kBf16>
__global__ void __launch_bounds__(kThreads) permute_quant_kernel(const __grid_constant__ Params p) {
  __shared__ float warp_max[kThreads / 32];
  const int64_t len = p.ranks * p.h;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    float m = 0.0f;
    for (int64_t c = threadIdx.x; c < len; c += kThreads)
      m = fmaxf(m, fabsf(value<kBf16>(p, row, c, p.permuted != nullptr)));  // fmaxf skips NaN
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    float amax = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
    __syncthreads();  // warp_max is rewritten for the next row
    int8_t* q = p.q + row * len;
    const float qf = static_cast<float>(p.qmax);
    if (!(amax > 0.0f)) {  // an all-zero row: zeros, scale 0 (SPEC §3)
      for (int64_t c = threadIdx.x; c < len; c += kThreads) q[c] = 0;
      if (threadIdx.x == 0) p.scales[row] = 0.0f;
      continue;
    }
    const float inv = __fdiv_rn(qf, amax);
    for (int64_t c = threadIdx.x; c < len; c += kThreads) {
      float t = rintf(__fmul_rn(value<kBf16>(p, row, c, false), inv));  // half to even
      t = t > qf ? qf : t;
      t = t < -qf ? -qf : t;
      t = t == t ? t : 0.0f;  // NaN -> 0
      q[c] = static_cast<int8_t>(t);
    }
    if (threadIdx.x == 0) p.scales[row] = __fdiv_rn(amax, qf);
  }
}

struct Int4Params {
  const uint8_t* src[kMaxPermuteRanks];
  const float* src_scales[kMaxPermuteRanks];
  int ranks;
  int64_t rows, half_h;  // half_h: bytes of one source row
  int8_t* q;
  float* scales;
  uint8_t* permuted;
};

// One thread per source byte (two codes); the first rows*ranks threads also move a scale.
__global__ void __launch_bounds__(kThreads)
    permute_int4_kernel(const __grid_constant__ Int4Params p) {
  const int64_t row_bytes = p.ranks * p.half_h, total = p.rows * row_bytes;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / row_bytes, rest = e % row_bytes;
    const int s = static_cast<int>(rest / p.half_h);
    const int64_t b = rest % p.half_h;
    const uint8_t byte = p.src[s][i * p.half_h + b];
    p.q[2 * e] = int4_low(byte);  // row i, column s*h + 2b: 2e, as rows are 2*row_bytes long
    p.q[2 * e + 1] = int4_high(byte);
    if (p.permuted != nullptr) p.permuted[e] = byte;
    if (e < p.rows * p.ranks) p.scales[e] = p.src_scales[e % p.ranks][e / p.ranks];
  }
}

}  // namespace

void permute_int4(const PermuteInt4Desc& d, void* stream) {
  const char* fn = "permute_int4 (CUDA)";
  CF_CHECK_ARG(d.ranks >= 1 && d.ranks <= kMaxPermuteRanks, fn, ": ranks=", d.ranks,
               " must be in [1, ", kMaxPermuteRanks, "]");
  CF_CHECK_ARG(d.rows >= 0 && d.h > 0 && d.h % 2 == 0, fn, ": rows=", d.rows, " h=", d.h,
               " (rows >= 0, h even and > 0)");
  CF_CHECK_NOTNULL(d.src, fn, ": src is null");
  CF_CHECK_NOTNULL(d.src_scales, fn, ": src_scales is null");
  CF_CHECK_NOTNULL(d.q, fn, ": q is null");
  CF_CHECK_NOTNULL(d.scales, fn, ": scales is null");
  CF_CHECK_ARG(aligned(d.scales, 4), fn, ": scales must be 4-byte aligned");
  if (d.rows == 0) return;
  require_device(fn);
  Int4Params p{};
  for (int s = 0; s < d.ranks; ++s) {
    CF_CHECK_NOTNULL(d.src[s], fn, ": src[", s, "] is null");
    CF_CHECK_NOTNULL(d.src_scales[s], fn, ": src_scales[", s, "] is null");
    CF_CHECK_ARG(aligned(d.src_scales[s], 4), fn, ": src_scales[", s, "] is not 4-byte aligned");
    p.src[s] = static_cast<const uint8_t*>(d.src[s]);
    p.src_scales[s] = d.src_scales[s];
  }
  p.ranks = d.ranks;
  p.rows = d.rows;
  p.half_h = d.h / 2;
  p.q = d.q;
  p.scales = d.scales;
  p.permuted = static_cast<uint8_t*>(d.permuted);
  // Enough threads for the scales too (rows*ranks <= the bytes, as h/2 >= 1).
  const int64_t total = d.rows * d.ranks * p.half_h;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  permute_int4_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch(fn);
}

void permute_quant(const PermuteQuantDesc& d, void* stream) {
  const char* fn = "permute_quant (CUDA)";
  CF_CHECK_ARG(d.x_dtype == DType::kBFloat16 || d.x_dtype == DType::kFloat16, fn, ": x_dtype ",
               dtype_name(d.x_dtype), " is not float16 or bfloat16");
  CF_CHECK_ARG(d.ranks >= 1 && d.ranks <= kMaxPermuteRanks, fn, ": ranks=", d.ranks,
               " must be in [1, ", kMaxPermuteRanks, "]");
  CF_CHECK_ARG(d.qmax == 127 || d.qmax == 7, fn, ": qmax=", d.qmax, " must be 127 or 7");
  CF_CHECK_ARG(d.rows >= 0 && d.h > 0, fn, ": rows=", d.rows, " h=", d.h, " (rows >= 0, h > 0)");
  CF_CHECK_ARG(d.src_row_stride >= d.h, fn, ": src_row_stride=", d.src_row_stride,
               " is below h=", d.h);
  CF_CHECK_NOTNULL(d.src, fn, ": src is null");
  CF_CHECK_NOTNULL(d.q, fn, ": q is null");
  CF_CHECK_NOTNULL(d.scales, fn, ": scales is null");
  CF_CHECK_ARG(aligned(d.scales, 4) && aligned(d.smooth, 2) && aligned(d.permuted, 2), fn,
               ": scales must be 4-byte aligned, smooth and permuted 2-byte aligned");
  if (d.rows == 0) return;
  require_device(fn);
  Params p{};
  for (int s = 0; s < d.ranks; ++s) {
    CF_CHECK_NOTNULL(d.src[s], fn, ": src[", s, "] is null");
    CF_CHECK_ARG(aligned(d.src[s], 2), fn, ": src[", s, "] is not 2-byte aligned");
    p.src[s] = static_cast<const uint16_t*>(d.src[s]);
  }
  p.ranks = d.ranks;
  p.src_row_stride = d.src_row_stride;
  p.rows = d.rows;
  p.h = d.h;
  p.smooth = static_cast<const uint16_t*>(d.smooth);
  p.qmax = d.qmax;
  p.q = d.q;
  p.scales = d.scales;
  p.permuted = static_cast<uint16_t*>(d.permuted);
  const int blocks = static_cast<int>(std::min<int64_t>(d.rows, 65535));
  auto s = static_cast<cudaStream_t>(stream);
  if (d.x_dtype == DType::kBFloat16)
    permute_quant_kernel<true><<<blocks, kThreads, 0, s>>>(p);
  else
    permute_quant_kernel<false><<<blocks, kThreads, 0, s>>>(p);
  check_launch(fn);
}

}  // namespace commfuse::kernels::cuda
