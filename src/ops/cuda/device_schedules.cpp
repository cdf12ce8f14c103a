// The matmul ops and the quantized reductions on the GPU (device_schedules.hpp; the alltoall
// ops: device_alltoall.cpp).
#include "ops/cuda/device_schedules.hpp"

#include <cuda_runtime_api.h>

#include "core/error.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/decode.hpp"
#include "kernels/cuda/epilogue.hpp"
#include "kernels/cuda/int_weights.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "kernels/cuda/sum_rows.hpp"
#include "ops/cuda/schedule_steps.hpp"

namespace commfuse::ops::cuda {
namespace {

namespace kc = kernels::cuda;

// x2 as the SPEC §6 GEMMs read it. HiF8: cuBLASLt has no HiFloat8 GEMM, so the codes are
// widened to bf16 (exact: kernels/cuda/decode.hpp) for a bf16 x bf16 -> fp32 GEMM, whose
// products are exact (SPEC §6 allows it; only the fp32 summation order is unspecified, as
// for FP8); x1's rows are widened too. A8W8 / FP8 with x2 as (k, n): cuBLASLt's int8 / fp8
// GEMMs take x2 stored (n, k) only, so it is transposed (kernels/cuda/int_weights.hpp). Both
// into scratch, once per call.
enum class X2Prep { kAsGiven, kDecode, kTranspose };
X2Prep x2_prep(const DeviceMatmul& a) {
  if (!a.quantized) return X2Prep::kAsGiven;
  if (a.dtype == DType::kHiFloat8) return X2Prep::kDecode;
  return a.x2_transposed ? X2Prep::kAsGiven : X2Prep::kTranspose;
}
bool decodes(const DeviceMatmul& a) {
  return x2_prep(a) == X2Prep::kDecode;
}
int64_t x2_rows(const DeviceMatmul& a) {
  return a.x2_transposed ? a.n : a.k;
}
int64_t x2_cols(const DeviceMatmul& a) {
  return a.x2_transposed ? a.k : a.n;
}
// Bytes of x2 prepared (dense), or 0 where the GEMM reads x2 as given.
size_t prepared_x2_bytes(const DeviceMatmul& a) {
  const auto elems = static_cast<size_t>(a.k * a.n);
  switch (x2_prep(a)) {
    case X2Prep::kDecode:
      return elems * 2;
    case X2Prep::kTranspose:
      return elems;
    case X2Prep::kAsGiven:
      break;
  }
  return 0;
}
void decode(DType t, int64_t rows, int64_t cols, const void* src, int64_t ld_src, void* dst,
            void* stream) {
  kc::DecodeBf16Desc d;
  d.code_dtype = t;
  d.rows = rows;
  d.cols = cols;
  d.src = src;
  d.ld_src = ld_src;
  d.dst = static_cast<uint16_t*>(dst);
  d.ld_dst = cols;
  kc::decode_to_bf16(d, stream);
}
void prepare_x2(const DeviceMatmul& a, void* dst, void* stream) {
  if (x2_prep(a) == X2Prep::kDecode) {
    decode(a.b_dtype, x2_rows(a), x2_cols(a), a.x2, a.ld_x2, dst, stream);
  } else if (x2_prep(a) == X2Prep::kTranspose) {
    kc::WeightsTnDesc w;  // a byte transpose: int8 and fp8 codes alike
    w.src_dtype = DType::kInt8;
    w.k = a.k;
    w.n = a.n;
    w.src = a.x2;
    w.ld_src = a.ld_x2;
    w.dst = static_cast<int8_t*>(dst);
    kc::weights_to_tn(w, stream);
  }
}
// The operands as the GEMM sees them, x2 prepared at `x2_prepared` (HiF8: x1 rows widened by
// the caller), else `a` itself.
DeviceMatmul gemm_view(const DeviceMatmul& a, const void* x2_prepared) {
  DeviceMatmul g = a;
  switch (x2_prep(a)) {
    case X2Prep::kDecode:
      g.dtype = g.b_dtype = DType::kBFloat16;
      g.x2 = x2_prepared;
      g.ld_x2 = x2_cols(a);
      break;
    case X2Prep::kTranspose:
      g.x2 = x2_prepared;
      g.ld_x2 = a.k;
      g.x2_transposed = true;
      break;
    case X2Prep::kAsGiven:
      break;
  }
  return g;
}

// The GEMM of `rows` rows (rows, k) @ x2 -> c (rows, n), c of type c_dtype with row stride n.
kc::GemmDesc matmul_desc(const DeviceMatmul& a, int64_t rows, DType c_dtype) {
  kc::GemmDesc d;
  d.m = rows;
  d.k = a.k;
  d.n = a.n;
  d.ab_dtype = a.dtype;
  d.b_dtype = a.quantized ? a.b_dtype : a.dtype;
  d.c_dtype = c_dtype;
  d.lda = a.k;
  d.ldb = a.ld_x2;
  d.ldc = a.n;
  d.b_transposed = a.x2_transposed;
  return d;
}

void gemm_rows(DeviceContext& ctx, const DeviceMatmul& a, int64_t rows, const void* x1_rows,
               void* c, DType c_dtype, void* stream) {
  kc::gemm(matmul_desc(a, rows, c_dtype), x1_rows, a.x2, c, ctx.gemm_workspace(),
           kc::kGemmWorkspaceBytes, stream);
}

// The GEMM's sums in quantized mode: exact int32 (A8W8) or fp32 (FP8).
DType acc_dtype(const DeviceMatmul& a) {
  return a.dtype == DType::kInt8 ? DType::kInt32 : DType::kFloat32;
}

// SPEC §6's epilogue of `rows` rows: acc (rows x n) with their x1 scales (rows values, or
// one) -> out rows, out_dtype (the reducing ops: float32 partials, no bias).
void quant_rows(const DeviceMatmul& a, int64_t rows, const void* acc, const float* x1_scale,
                bool per_row, bool with_bias, void* out, DType out_dtype, void* stream) {
  kc::EpilogueDesc e;
  e.m = rows;
  e.n = a.n;
  e.acc_dtype = acc_dtype(a);
  e.acc = acc;
  e.ld_acc = a.n;
  e.a_scale = x1_scale;
  e.a_per_row = per_row;
  e.b_scale = a.x2_scale;
  e.b_per_column = a.x2_per_channel;
  if (with_bias) {
    e.bias32 = a.bias_int != nullptr ? nullptr : a.bias;
    e.bias32_dtype = a.bias_dtype;
    e.bias_int = a.bias_int;
  }
  e.out_dtype = out_dtype;
  e.out = out;
  e.ld_out = a.n;
  kc::quant_epilogue(e, stream);
}

}  // namespace

std::string matmul_gemm_unsupported(const DeviceMatmul& a) {
  return kc::gemm_unsupported(
      matmul_desc(gemm_view(a, nullptr), a.m, a.quantized ? acc_dtype(a) : DType::kFloat32));
}

void all_gather_matmul(DeviceContext& ctx, const DeviceMatmul& a, void* gather_out, void* stream) {
  const int rank = ctx.rank(), size = ctx.size();
  const size_t elem = dtype_storage_bytes(a.dtype, 1);
  const size_t block = static_cast<size_t>(a.m * a.k) * elem;  // one rank's rows of x1
  if (a.m == 0) {
    ctx.exchange();  // the op still synchronizes (SPEC §2)
    return;
  }
  // Quantized: each rank's x1 scales travel with its rows, after them (256-byte aligned),
  // always one per row (a per-tensor or absent scale expanded, as the CPU does: the ranks
  // may pass different forms, and each block is scaled with its own rank's).
  // HiF8: the rows widened to bf16 follow (the GEMMs read those; gather_out the codes).
  const size_t scales_at = heap_align(block);
  const size_t bf16_at = heap_align(scales_at + static_cast<size_t>(a.m) * 4);
  const size_t heap_bytes = decodes(a)    ? bf16_at + static_cast<size_t>(a.m * a.k) * 2
                            : a.quantized ? scales_at + static_cast<size_t>(a.m) * 4
                                          : block;
  const DeviceContext::Half h = ctx.begin_call(heap_bytes, stream);
  copy(h.mine, a.x1, block, stream, rank);
  if (a.quantized) {
    auto* mine_scales = reinterpret_cast<float*>(static_cast<char*>(h.mine) + scales_at);
    if (a.x1_scale != nullptr && a.x1_per_token)
      copy(mine_scales, a.x1_scale, static_cast<size_t>(a.m) * 4, stream, rank);
    else
      kc::broadcast_f32(a.x1_scale != nullptr ? a.x1_scale : ctx.one(), a.m, mine_scales, stream);
  }
  if (decodes(a))
    decode(a.dtype, a.m, a.k, a.x1, a.k, static_cast<char*>(h.mine) + bf16_at, stream);
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
  // With a bias (or quantized) the GEMMs accumulate into scratch and an epilogue adds the
  // bias (and the scales) and rounds once (SPEC §0, §6); without, cuBLASLt rounds its fp32
  // accumulation to the output once.
  const int64_t rows = a.m * size;
  const bool staged = a.bias != nullptr || a.quantized;
  const DType c_dtype = a.quantized ? acc_dtype(a) : staged ? DType::kFloat32 : a.dtype;
  ScratchPieces at;
  const size_t c_at = at.take(staged ? static_cast<size_t>(rows * a.n) * 4 : 0);
  const size_t x2_at = at.take(prepared_x2_bytes(a));
  char* scratch = reinterpret_cast<char*>(ctx.scratch(at.total(), stream));
  void* c = staged ? scratch + c_at : a.out;
  prepare_x2(a, scratch + x2_at, stream);
  const DeviceMatmul g = gemm_view(a, scratch + x2_at);
  const size_t c_block = static_cast<size_t>(a.m * a.n) * dtype_storage_bytes(c_dtype, 1);
  const size_t out_block =
      static_cast<size_t>(a.m * a.n) * dtype_storage_bytes(a.quantized ? a.out_dtype : a.dtype, 1);
  for (int i = 0; i < size; ++i) {  // this rank's rows first: they need no wait
    const int p = (rank + i) % size;
    if (i > 0) ctx.wait_ready(p, stream);
    const auto* rows_p =
        decodes(a) ? static_cast<const char*>(h.part[static_cast<size_t>(p)]) + bf16_at
                   : static_cast<const char*>(i == 0 ? a.x1 : h.part[static_cast<size_t>(p)]);
    gemm_rows(ctx, g, a.m, rows_p, static_cast<char*>(c) + c_block * p, c_dtype, stream);
    if (a.quantized)
      quant_rows(a, a.m, static_cast<char*>(c) + c_block * p,
                 reinterpret_cast<const float*>(
                     static_cast<const char*>(h.part[static_cast<size_t>(p)]) + scales_at),
                 /*per_row=*/true, true, static_cast<char*>(a.out) + out_block * p, a.out_dtype,
                 stream);
  }
  if (a.bias != nullptr && !a.quantized) {
    add_bias_round(static_cast<const float*>(c), rows, a.n, a.bias, a.bias_dtype, a.dtype, a.out,
                   stream);
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
  if (a.quantized) {  // partial = f32(x1 @ x2) * (x1_scale[i] * x2_scale[j]), no bias yet
    ScratchPieces at;
    const size_t acc_at = at.take(bytes);
    const size_t x1_at = at.take(decodes(a) ? static_cast<size_t>(a.m * a.k) * 2 : 0);
    const size_t x2_at = at.take(prepared_x2_bytes(a));
    char* scratch = reinterpret_cast<char*>(ctx.scratch(at.total(), stream));
    void* acc = scratch + acc_at;
    if (decodes(a)) decode(a.dtype, a.m, a.k, a.x1, a.k, scratch + x1_at, stream);
    prepare_x2(a, scratch + x2_at, stream);
    gemm_rows(ctx, gemm_view(a, scratch + x2_at), a.m, decodes(a) ? scratch + x1_at : a.x1, acc,
              acc_dtype(a), stream);
    quant_rows(a, a.m, acc, a.x1_scale != nullptr ? a.x1_scale : ctx.one(),
               a.x1_scale != nullptr && a.x1_per_token, false, h.mine, DType::kFloat32, stream);
  } else {
    gemm_rows(ctx, a, a.m, a.x1, h.mine, DType::kFloat32, stream);
  }
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
  e.out_dtype = a.quantized ? a.out_dtype : a.dtype;
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
  const size_t scales_at = heap_align(codes);
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
