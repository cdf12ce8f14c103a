#include "kernels/cuda/sum_rows.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.hpp"
#include "kernels/cuda/float_io.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Passed by value: the part pointers live in the kernel's parameter space.
struct Params {
  const float* part[kMaxSumParts];
  int parts;
  int64_t ld_part, rows, n, ld_out;
  const void* bias;
  DType bias_dtype, out_dtype;
  void* out;
};

// One thread per output element, in the CPU's order of operations: __fadd_rn is one IEEE
// rounding and never contracts into an FMA.
__global__ void __launch_bounds__(kThreads) sum_rows_kernel(const Params p) {
  const int64_t total = p.rows * p.n;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / p.n, j = e % p.n;
    float acc = p.part[0][i * p.ld_part + j];
    for (int r = 1; r < p.parts; ++r) acc = __fadd_rn(acc, p.part[r][i * p.ld_part + j]);
    if (p.bias != nullptr) acc = __fadd_rn(acc, load_float(p.bias, p.bias_dtype, j));
    store_float(p.out, p.out_dtype, i * p.ld_out + j, acc);
  }
}

__global__ void __launch_bounds__(kThreads)
    broadcast_kernel(const float* src, int64_t count, float* dst) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = *src;
}

}  // namespace

void sum_bias_round(const SumRowsDesc& d, void* stream) {
  const char* fn = "sum_bias_round (CUDA)";
  CF_CHECK_ARG(d.parts >= 1 && d.parts <= kMaxSumParts, fn, ": parts=", d.parts, " (1..",
               kMaxSumParts, ")");
  CF_CHECK_ARG(d.rows >= 0 && d.n > 0, fn, ": rows=", d.rows, " n=", d.n, " (rows >= 0, n > 0)");
  CF_CHECK_ARG(d.ld_part >= d.n, fn, ": ld_part=", d.ld_part, " is below n=", d.n);
  CF_CHECK_ARG(d.ld_out >= d.n, fn, ": ld_out=", d.ld_out, " is below n=", d.n);
  CF_CHECK_ARG(float_dtype(d.out_dtype), fn, ": out_dtype ", dtype_name(d.out_dtype),
               " is not float32, float16 or bfloat16");
  CF_CHECK_ARG(d.bias == nullptr || float_dtype(d.bias_dtype), fn, ": bias_dtype ",
               dtype_name(d.bias_dtype), " is not float32, float16 or bfloat16");
  CF_CHECK_NOTNULL(d.part, fn, ": part is null");
  CF_CHECK_NOTNULL(d.out, fn, ": out is null");
  Params p{};
  for (int r = 0; r < d.parts; ++r) {
    CF_CHECK_NOTNULL(d.part[r], fn, ": part[", r, "] is null");
    CF_CHECK_ARG(aligned(d.part[r], 4), fn, ": part[", r, "] is not 4-byte aligned");
    p.part[r] = d.part[r];
  }
  CF_CHECK_ARG(aligned(d.bias, dtype_storage_bytes(d.bias_dtype, 1)), fn,
               ": bias is not aligned to its ", dtype_name(d.bias_dtype), " elements");
  CF_CHECK_ARG(aligned(d.out, dtype_storage_bytes(d.out_dtype, 1)), fn,
               ": out is not aligned to its ", dtype_name(d.out_dtype), " elements");
  if (d.rows == 0) return;
  require_device(fn);
  p.parts = d.parts;
  p.ld_part = d.ld_part;
  p.rows = d.rows;
  p.n = d.n;
  p.ld_out = d.ld_out;
  p.bias = d.bias;
  p.bias_dtype = d.bias_dtype;
  p.out_dtype = d.out_dtype;
  p.out = d.out;
  const int64_t total = d.rows * d.n;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  sum_rows_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch(fn);
}

void broadcast_f32(const float* src, int64_t count, float* dst, void* stream) {
  const char* fn = "broadcast_f32 (CUDA)";
  CF_CHECK_ARG(count >= 0, fn, ": count=", count, " is negative");
  CF_CHECK_NOTNULL(src, fn, ": src is null");
  CF_CHECK_NOTNULL(dst, fn, ": dst is null");
  CF_CHECK_ARG(aligned(src, 4) && aligned(dst, 4), fn, ": src and dst must be 4-byte aligned");
  if (count == 0) return;
  require_device(fn);
  const int blocks = static_cast<int>(std::min<int64_t>((count + kThreads - 1) / kThreads, 65535));
  broadcast_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, count, dst);
  check_launch(fn);
}

}  // namespace commfuse::kernels::cuda
