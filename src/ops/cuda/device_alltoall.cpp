// alltoall_matmul and alltoall_quant_matmul on the GPU (device_schedules.hpp).
#include "ops/cuda/device_schedules.hpp"

#include <cuda_runtime_api.h>

#include "core/error.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/epilogue.hpp"
#include "kernels/cuda/int_weights.hpp"
#include "kernels/cuda/permute_quant.hpp"
#include "ops/cuda/schedule_steps.hpp"

namespace commfuse::ops::cuda {
namespace {

namespace kc = kernels::cuda;

// alltoall's GEMM: permuted (rows, R*h) @ x2 -> (rows, n), into `c_dtype`. Quantized, x2 is
// (n, R*h) int8 (as given or converted); A4W4 runs one per source segment (k = h) on column
// block s of the codes and of x2.
kc::GemmDesc alltoall_desc(const DeviceAlltoAll& a, int ranks, DType c_dtype) {
  const int64_t k = a.h * ranks;
  kc::GemmDesc g;
  g.m = a.bs / ranks;
  g.k = a.x1_dtype == DType::kInt4 ? a.h : k;
  g.n = a.n;
  g.ab_dtype = g.b_dtype = a.quantized ? DType::kInt8 : a.x1_dtype;
  g.c_dtype = c_dtype;
  g.b_transposed = a.quantized || a.x2_transposed;
  g.lda = k;
  g.ldb = g.b_transposed ? k : a.n;
  g.ldc = a.n;
  return g;
}

// The quantized alltoall's GEMM part, after the exchange: src[s] is rank s's block for this
// rank (A4W4: its token scales at src_scales[s]), read in place.
void alltoall_quant(DeviceContext& ctx, const DeviceAlltoAll& a, const void* const* src,
                    const float* const* src_scales, void* stream) {
  const int size = ctx.size();
  const bool a4w4 = a.x1_dtype == DType::kInt4;
  const int64_t rows = a.bs / size, k = a.h * size;
  const int segments = a4w4 ? size : 1;
  const bool convert_x2 = a.b_dtype != DType::kInt8 || !a.x2_transposed;
  ScratchPieces at;
  const size_t x2_at = at.take(convert_x2 ? static_cast<size_t>(a.n * k) : 0);
  const size_t codes_at = at.take(static_cast<size_t>(rows * k));
  const size_t scales_at = at.take(static_cast<size_t>(rows * segments) * 4);
  const size_t acc_at = at.take(static_cast<size_t>(rows * a.n * segments) * 4);
  char* scratch = reinterpret_cast<char*>(ctx.scratch(at.total(), stream));
  auto* x2 = reinterpret_cast<int8_t*>(scratch + x2_at);
  auto* codes = reinterpret_cast<int8_t*>(scratch + codes_at);
  auto* token_scale = reinterpret_cast<float*>(scratch + scales_at);
  auto* acc = reinterpret_cast<int32_t*>(scratch + acc_at);
  if (convert_x2) {
    kc::WeightsTnDesc w;
    w.src_dtype = a.b_dtype;
    w.src_transposed = a.x2_transposed;
    w.k = k;
    w.n = a.n;
    w.src = a.x2;
    w.dst = x2;
    kc::weights_to_tn(w, stream);
  }
  if (a4w4) {
    kc::PermuteInt4Desc pq;
    pq.ranks = size;
    pq.src = src;
    pq.src_scales = src_scales;
    pq.rows = rows;
    pq.h = a.h;
    pq.q = codes;
    pq.scales = token_scale;
    pq.permuted = a.all_to_all_out;
    kc::permute_int4(pq, stream);
  } else {
    kc::PermuteQuantDesc pq;
    pq.x_dtype = a.x1_dtype;
    pq.ranks = size;
    pq.src = src;
    pq.src_row_stride = a.h;
    pq.rows = rows;
    pq.h = a.h;
    pq.smooth = a.smooth;
    pq.qmax = a.b_dtype == DType::kInt4 ? 7 : 127;
    pq.q = codes;
    pq.scales = token_scale;
    pq.permuted = a.all_to_all_out;
    kc::permute_quant(pq, stream);
  }
  const kc::GemmDesc g = alltoall_desc(a, size, DType::kInt32);
  const int8_t* b = convert_x2 ? x2 : static_cast<const int8_t*>(a.x2);
  for (int s = 0; s < segments; ++s)  // A4W4: segment s is column block s of codes and x2
    kc::gemm(g, codes + s * g.k, b + s * g.k, acc + s * rows * a.n, ctx.gemm_workspace(),
             kc::kGemmWorkspaceBytes, stream);
  kc::TokenEpilogueDesc e;
  e.m = rows;
  e.n = a.n;
  e.segments = a4w4 ? segments : 0;
  e.acc = acc;
  e.token_scale = token_scale;
  e.x2_scale = a.x2_scale;
  e.bias = a.bias;
  e.bias_dtype = a.bias_dtype;
  e.out_dtype = a.out_dtype;
  e.out = a.out;
  kc::token_epilogue(e, stream);
}

}  // namespace

std::string alltoall_gemm_unsupported(const DeviceAlltoAll& a, int ranks) {
  return kc::gemm_unsupported(
      alltoall_desc(a, ranks, a.quantized ? DType::kInt32 : DType::kFloat32));
}

void alltoall_matmul(DeviceContext& ctx, const DeviceAlltoAll& a, void* stream) {
  const int rank = ctx.rank(), size = ctx.size();
  CF_CHECK_ARG(size <= kc::kMaxPermuteRanks, "alltoall_matmul (CUDA): ", size,
               " ranks are not supported (at most ", kc::kMaxPermuteRanks, ")");
  const bool a4w4 = a.x1_dtype == DType::kInt4;
  const int64_t rows = a.bs / size, k = a.h * size;
  // One rank's rows for one peer; A4W4's token scales follow the codes, 256-byte aligned.
  const size_t block = dtype_storage_bytes(a.x1_dtype, static_cast<size_t>(rows * a.h));
  const size_t scales_at = heap_align(block * size);
  const DeviceContext::Half h =
      ctx.begin_call(a4w4 ? scales_at + static_cast<size_t>(a.bs) * 4 : block * size, stream);
  copy(h.mine, a.x1, block * size, stream, rank);
  if (a4w4)
    copy(static_cast<char*>(h.mine) + scales_at, a.token_scale, static_cast<size_t>(a.bs) * 4,
         stream, rank);
  ctx.publish_ready(stream);
  ctx.exchange();
  for (int i = 1; i < size; ++i) ctx.wait_ready((rank + i) % size, stream);
  const void* src[kc::kMaxPermuteRanks];  // rank s's rows for this rank, read in place
  const float* src_scales[kc::kMaxPermuteRanks];
  for (int s = 0; s < size; ++s) {
    const auto* base = static_cast<const char*>(h.part[static_cast<size_t>(s)]);
    src[s] = base + block * rank;
    src_scales[s] = a4w4 ? reinterpret_cast<const float*>(base + scales_at) + rows * rank : nullptr;
  }
  if (a.quantized) {
    alltoall_quant(ctx, a, src, src_scales, stream);
    ctx.end_call(stream);
    return;
  }
  // Unquantized: the permuted rows (in all_to_all_out, or scratch), then with a bias the
  // fp32 product.
  const size_t elem = dtype_storage_bytes(a.x1_dtype, 1);
  ScratchPieces at;
  const size_t permuted_at =
      at.take(a.all_to_all_out != nullptr ? 0 : static_cast<size_t>(rows * k) * elem);
  const size_t acc_at = at.take(a.bias != nullptr ? static_cast<size_t>(rows * a.n) * 4 : 0);
  char* scratch = reinterpret_cast<char*>(ctx.scratch(at.total(), stream));
  void* permuted = a.all_to_all_out != nullptr ? a.all_to_all_out : scratch + permuted_at;
  void* acc = scratch + acc_at;
  // permuted[i, s*h:(s+1)*h] = rank s's row i for this rank: one strided copy per rank.
  for (int s = 0; s < size; ++s)
    check(cudaMemcpy2DAsync(static_cast<char*>(permuted) + static_cast<size_t>(a.h) * elem * s,
                            static_cast<size_t>(k) * elem, src[s], static_cast<size_t>(a.h) * elem,
                            static_cast<size_t>(a.h) * elem, static_cast<size_t>(rows),
                            cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
          rank, "cudaMemcpy2DAsync");
  kc::gemm(alltoall_desc(a, size, a.bias != nullptr ? DType::kFloat32 : a.out_dtype), permuted,
           a.x2, a.bias != nullptr ? acc : a.out, ctx.gemm_workspace(), kc::kGemmWorkspaceBytes,
           stream);
  if (a.bias != nullptr) {
    add_bias_round(static_cast<const float*>(acc), rows, a.n, a.bias, a.bias_dtype, a.out_dtype,
                   a.out, stream);
  }
  ctx.end_call(stream);
}

}  // namespace commfuse::ops::cuda
