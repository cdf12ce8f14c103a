#include "kernels/cuda/int_weights.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.hpp"
#include "kernels/cuda/int4.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

// Element `at` of a dense int8 or int4 array, as int8.
__device__ int8_t element(const uint8_t* src, bool int4, int64_t at) {
  return int4 ? int4_at(src, at) : static_cast<int8_t>(src[at]);
}

// src already (n, k): a widening copy.
__global__ void widen_kernel(const WeightsTnDesc d, int64_t ld) {
  const auto* src = static_cast<const uint8_t*>(d.src);
  const bool int4 = d.src_dtype == DType::kInt4;
  const int64_t total = d.n * d.k;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x)
    d.dst[e] = element(src, int4, e / d.k * ld + e % d.k);
}

// src (k, n): one 32 x 32 tile per block, read along n and written along k (both coalesced).
// The tile's row is padded to 33 bytes so a warp's column reads of the second pass do not
// all fall on the same few banks.
__global__ void __launch_bounds__(kTile* kRowsPerPass)
    transpose_kernel(const WeightsTnDesc d, int64_t ld) {
  __shared__ int8_t tile[kTile][kTile + 1];
  const auto* src = static_cast<const uint8_t*>(d.src);
  const bool int4 = d.src_dtype == DType::kInt4;
  const int64_t j0 = int64_t{blockIdx.x} * kTile;
  for (int64_t c0 = int64_t{blockIdx.y} * kTile; c0 < d.k; c0 += int64_t{gridDim.y} * kTile) {
    for (int dy = threadIdx.y; dy < kTile; dy += kRowsPerPass) {
      const int64_t c = c0 + dy, j = j0 + threadIdx.x;
      if (c < d.k && j < d.n) tile[dy][threadIdx.x] = element(src, int4, c * ld + j);
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < kTile; dy += kRowsPerPass) {
      const int64_t j = j0 + dy, c = c0 + threadIdx.x;
      if (c < d.k && j < d.n) d.dst[j * d.k + c] = tile[threadIdx.x][dy];
    }
    __syncthreads();  // the tile is rewritten for the next c0
  }
}

}  // namespace

void weights_to_tn(const WeightsTnDesc& d, void* stream) {
  const char* fn = "weights_to_tn (CUDA)";
  CF_CHECK_ARG(d.src_dtype == DType::kInt8 || d.src_dtype == DType::kInt4, fn, ": src_dtype ",
               dtype_name(d.src_dtype), " is not int8 or int4");
  CF_CHECK_ARG(d.k > 0 && d.n > 0, fn, ": k=", d.k, " n=", d.n, " (both > 0)");
  CF_CHECK_ARG(d.src_dtype != DType::kInt4 || (d.src_transposed ? d.k : d.n) % 2 == 0, fn,
               ": int4 src needs an even row length (",
               d.src_transposed ? "k=" : "n=", d.src_transposed ? d.k : d.n, ")");
  const int64_t row = d.src_transposed ? d.k : d.n, ld = d.ld_src != 0 ? d.ld_src : row;
  CF_CHECK_ARG(ld >= row && (d.src_dtype != DType::kInt4 || ld % 2 == 0), fn, ": ld_src=", d.ld_src,
               " is below the stored rows' length ", row, " (or odd for int4)");
  CF_CHECK_NOTNULL(d.src, fn, ": src is null");
  CF_CHECK_NOTNULL(d.dst, fn, ": dst is null");
  require_device(fn);
  auto s = static_cast<cudaStream_t>(stream);
  if (d.src_transposed) {
    const int64_t total = d.n * d.k;
    const int blocks = static_cast<int>(std::min<int64_t>((total + 255) / 256, 65535));
    widen_kernel<<<blocks, 256, 0, s>>>(d, ld);
  } else {
    const dim3 grid(static_cast<unsigned>((d.n + kTile - 1) / kTile),
                    static_cast<unsigned>(std::min<int64_t>((d.k + kTile - 1) / kTile, 65535)));
    transpose_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, s>>>(d, ld);
  }
  check_launch(fn);
}

}  // namespace commfuse::kernels::cuda
