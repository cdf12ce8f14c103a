#include "ops/cuda/device_schedules.hpp"

#include <cuda_runtime_api.h>

#include "core/error.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "kernels/cuda/sum_rows.hpp"

namespace commfuse::ops::cuda {
namespace {

namespace kc = kernels::cuda;

void check(cudaError_t e, int rank, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  detail::throw_status(Status::kRuntimeError, detail::cat("CUDA schedule (rank ", rank, "): ", what,
                                                          " failed: ", cudaGetErrorString(e)));
}

void copy(void* dst, const void* src, size_t bytes, void* stream, int rank) {
  check(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
      rank, "cudaMemcpyAsync");
}

// rows of a (rows, k) @ x2 -> c (rows, n), c of type c_dtype with row stride n.
void gemm_rows(DeviceContext& ctx, const DeviceMatmul& a, int64_t rows, const void* x1_rows,
               void* c, DType c_dtype, void* stream) {
  kc::GemmDesc d;
  d.m = rows;
  d.k = a.k;
  d.n = a.n;
  d.ab_dtype = d.b_dtype = a.dtype;
  d.c_dtype = c_dtype;
  d.lda = a.k;
  d.ldb = a.ld_x2;
  d.ldc = a.n;
  d.b_transposed = a.x2_transposed;
  kc::gemm(d, x1_rows, a.x2, c, ctx.gemm_workspace(), kc::kGemmWorkspaceBytes, stream);
}

}  // namespace

void all_gather_matmul(DeviceContext& ctx, const DeviceMatmul& a, void* gather_out, void* stream) {
  const int rank = ctx.rank(), size = ctx.size();
  const size_t elem = dtype_storage_bytes(a.dtype, 1);
  const size_t block = static_cast<size_t>(a.m * a.k) * elem;  // one rank's rows of x1
  if (a.m == 0) {
    ctx.exchange();  // the op still synchronizes (SPEC §2)
    return;
  }
  const DeviceContext::Half h = ctx.begin_call(block, stream);
  copy(h.mine, a.x1, block, stream, rank);
  ctx.publish_ready(stream);
  ctx.exchange();

  if (gather_out != nullptr) {
    void* cs = ctx.copy_stream();
    ctx.fork_copies(stream);
    copy(static_cast<char*>(gather_out) + block * rank, a.x1, block, cs, rank);
    for (int i = 1; i < size; ++i) {
      const int p = (rank + i) % size;
      ctx.wait_ready(p, cs);
      copy(static_cast<char*>(gather_out) + block * p, h.part[static_cast<size_t>(p)], block, cs,
           rank);
    }
  }
  // With a bias the GEMMs accumulate into fp32 scratch and one epilogue adds it and rounds
  // once (SPEC §0); without, cuBLASLt rounds its fp32 accumulation to the output once.
  const int64_t rows = a.m * size;
  const DType c_dtype = a.bias != nullptr ? DType::kFloat32 : a.dtype;
  void* c = a.bias != nullptr ? ctx.scratch(static_cast<size_t>(rows * a.n) * 4, stream) : a.out;
  const size_t c_block = static_cast<size_t>(a.m * a.n) * dtype_storage_bytes(c_dtype, 1);
  gemm_rows(ctx, a, a.m, a.x1, static_cast<char*>(c) + c_block * rank, c_dtype, stream);
  for (int i = 1; i < size; ++i) {
    const int p = (rank + i) % size;
    ctx.wait_ready(p, stream);
    gemm_rows(ctx, a, a.m, h.part[static_cast<size_t>(p)], static_cast<char*>(c) + c_block * p,
              c_dtype, stream);
  }
  if (a.bias != nullptr) {
    const float* part = static_cast<const float*>(c);
    kc::SumRowsDesc e;
    e.parts = 1;
    e.part = &part;
    e.ld_part = a.n;
    e.rows = rows;
    e.n = a.n;
    e.bias = a.bias;
    e.bias_dtype = a.bias_dtype;
    e.out_dtype = a.dtype;
    e.out = a.out;
    e.ld_out = a.n;
    kc::sum_bias_round(e, stream);
  }
  if (gather_out != nullptr) ctx.join_copies(stream);
  ctx.end_call(stream);  // every read of the peers' halves is queued before this
}

void matmul_reduce(DeviceContext& ctx, const DeviceMatmul& a, bool all_reduce, void* stream) {
  const int rank = ctx.rank(), size = ctx.size();
  CF_CHECK_ARG(size <= kc::kMaxSumParts, "matmul_reduce (CUDA): ", size,
               " ranks are not supported (at most ", kc::kMaxSumParts, ")");
  if (a.m == 0) {
    ctx.exchange();
    return;
  }
  const size_t bytes = static_cast<size_t>(a.m * a.n) * 4;  // the fp32 partial product
  const DeviceContext::Half h = ctx.begin_call(bytes, stream);
  gemm_rows(ctx, a, a.m, a.x1, h.mine, DType::kFloat32, stream);
  ctx.publish_ready(stream);
  ctx.exchange();
  for (int i = 1; i < size; ++i) ctx.wait_ready((rank + i) % size, stream);

  const int64_t rows = all_reduce ? a.m : a.m / size;
  const int64_t row0 = all_reduce ? 0 : rows * rank;
  const float* parts[kc::kMaxSumParts];
  for (int r = 0; r < size; ++r)
    parts[r] = static_cast<const float*>(h.part[static_cast<size_t>(r)]) + row0 * a.n;
  kc::SumRowsDesc e;
  e.parts = size;
  e.part = parts;
  e.ld_part = a.n;
  e.rows = rows;
  e.n = a.n;
  e.bias = a.bias;
  e.bias_dtype = a.bias_dtype;
  e.out_dtype = a.dtype;
  e.out = a.out;
  e.ld_out = a.n;
  kc::sum_bias_round(e, stream);
  ctx.end_call(stream);
}

void quant_reduce(DeviceContext& ctx, const DeviceQuantReduce& a, bool all_reduce, void* stream) {
  const int rank = ctx.rank(), size = ctx.size();
  CF_CHECK_ARG(size <= kc::kMaxDequantRanks, "quant_reduce (CUDA): ", size,
               " ranks are not supported (at most ", kc::kMaxDequantRanks, ")");
  if (a.rows == 0) {
    ctx.exchange();
    return;
  }
  // This rank's block in its half: the codes, then (256-byte aligned) the scales.
  const size_t codes = static_cast<size_t>(a.rows * a.h);
  const size_t scales_at = (codes + 255) / 256 * 256;
  const size_t scales = static_cast<size_t>(a.rows * a.scale_row_bytes);
  const DeviceContext::Half h = ctx.begin_call(scales_at + scales, stream);
  copy(h.mine, a.x, codes, stream, rank);
  copy(static_cast<char*>(h.mine) + scales_at, a.scales, scales, stream, rank);
  ctx.publish_ready(stream);
  ctx.exchange();
  for (int i = 1; i < size; ++i) ctx.wait_ready((rank + i) % size, stream);

  const int64_t rows = all_reduce ? a.rows : a.rows / size;
  const int64_t row0 = all_reduce ? 0 : rows * rank;
  const uint8_t* code_parts[kc::kMaxDequantRanks];
  const uint8_t* scale_parts[kc::kMaxDequantRanks];
  for (int r = 0; r < size; ++r) {
    const auto* base = static_cast<const uint8_t*>(h.part[static_cast<size_t>(r)]);
    code_parts[r] = base + row0 * a.h;
    scale_parts[r] = base + scales_at + row0 * a.scale_row_bytes;
  }
  kc::DequantSumDesc d;
  d.x_dtype = a.x_dtype;
  d.mx = a.mx;
  d.ranks = size;
  d.codes = code_parts;
  d.scales = scale_parts;
  d.rows = rows;
  d.h = a.h;
  d.codes_row_bytes = a.h;
  d.scales_row_bytes = a.scale_row_bytes;
  d.out_dtype = a.out_dtype;
  d.out = a.out;
  kc::dequant_sum(d, stream);
  ctx.end_call(stream);
}

}  // namespace commfuse::ops::cuda
