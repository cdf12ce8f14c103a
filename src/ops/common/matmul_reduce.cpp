#include "ops/common/matmul_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>

#include "comm/comm_impl.hpp"
#include "exec/stream.hpp"
#include "kernels/cpu/copy.hpp"
#include "ops/common/epilogue.hpp"
#include "ops/common/quant_operands.hpp"

namespace commfuse::ops {

Device check_matmul_reduce_devices(const OpContext& ctx, const TensorView& x1, const TensorView& x2,
                                   const TensorView& output, const MatmulReduceOptions& options) {
  return check_devices(ctx, {{"x1", &x1},
                             {"x2", &x2},
                             {"output", &output},
                             {"bias", given(options.bias)},
                             {"x1_scale", given(options.x1_scale)},
                             {"x2_scale", given(options.x2_scale)}});
}

void check_matmul_reduce_disjoint(const OpContext& ctx, const TensorView& x1, const TensorView& x2,
                                  const TensorView& output, const MatmulReduceOptions& options) {
  check_disjoint(ctx, {{"output", &output}},
                 {{"x1", &x1},
                  {"x2", &x2},
                  {"bias", given(options.bias)},
                  {"x1_scale", given(options.x1_scale)},
                  {"x2_scale", given(options.x2_scale)}});
}

MatmulReduceProblem validate_matmul_operands(const OpContext& ctx, const TensorView& x1,
                                             const TensorView& x2,
                                             const MatmulReduceOptions& options, bool allow_3d) {
  check_reduce_op(ctx, options.reduce_op);
  check_comm_turn(ctx, options.comm_turn);
  check_present(ctx, "x1", x1);
  if (!(x1.ndim == 2 || (allow_3d && x1.ndim == 3)))
    ctx.invalid("x1 must be ", allow_3d ? "2-D (m, k) or 3-D (b, s, k)" : "2-D (m, k)",
                " but has shape ", shape_str(x1));
  check_matmul_x1_dtype(ctx, x1);
  check_contiguous(ctx, "x1", x1);
  MatmulReduceProblem p;
  p.group = ctx.comm().name();
  p.rank = ctx.rank();
  p.world_size = ctx.world_size();
  p.dtype = x1.dtype;
  p.k = x1.shape[x1.ndim - 1];
  p.m = x1.numel() / (p.k > 0 ? p.k : 1);
  if (p.k < 1) ctx.invalid("x1 dim ", x1.ndim - 1, " (k) is ", p.k, " but must be >= 1");
  p.x1 = x1.data;
  // check_x2 names "x1 dim 1"; for 3-D x1 k is dim 2, so say so first.
  if (x1.ndim == 3 && x2.present() && x2.ndim == 2 && x2.shape[0] != p.k)
    ctx.invalid("x2 dim 0 is ", x2.shape[0], " but x1 dim 2 is ", p.k, " (k must match)");
  p.x2 = check_x2(ctx, x2, p.dtype, p.k);
  p.n = p.x2.n;
  // The fp32 partial product (m·n, in the workspace) is R times matmul_reduce_scatter's
  // output and twice a 16-bit output: neither check bounds it. Twice over: the unfused
  // schedules keep the collective's fp32 result next to it, and the workspace size, their
  // sum plus the GEMM's, must not wrap (it did: 68 bytes reported for 1.8e19 needed).
  int64_t partial = 0;
  if (__builtin_mul_overflow(p.m, p.n, &partial) ||
      partial > PTRDIFF_MAX / static_cast<int64_t>(2 * sizeof(float)) - p.n)
    ctx.invalid("x1 has m = ", p.m, " rows and x2 n = ", p.n,
                " columns: twice the fp32 partial product of m·n elements exceeds the largest "
                "buffer (",
                PTRDIFF_MAX, " bytes)");
  p.quant =
      check_quant_scales(ctx, p.dtype, x2.dtype, p.m, p.n, options.x1_scale, options.x2_scale);
  if (p.quant.mode == QuantMatmulMode::kA8W8)
    check_int32_accumulation(ctx, "x1's last dim (k)", p.k, 128, 128, "int8 x int8");
  // An int32 bias belongs to A8W8 all_gather_matmul only (SPEC §6): here the bias is added
  // once to the rank-order fp32 sum.
  p.bias = check_matmul_bias(ctx, options.bias, p.dtype, p.n, p.quant, /*allow_int32=*/false);
  p.comm_turn = options.comm_turn;
  return p;
}

std::string describe_problem(const char* op, const MatmulReduceProblem& p) {
  return detail::cat(op, "(rank ", p.rank, ") m=", p.m, " R=", p.world_size, " k=", p.k, " n=", p.n,
                     " ", dtype_name(p.dtype));
}

std::string describe_matmul_reduce_plan(const char* op, const MatmulReduceProblem& p,
                                        const char* schedule, size_t workspace_bytes,
                                        const PartialShape& gemm) {
  return detail::cat(
      describe_problem(op, p), ", schedule ", schedule, ", workspace ", workspace_bytes,
      " bytes; gemm: ",
      gemm.quantized ? describe_quant_gemm(gemm.qgemm) : describe_row_gemm(gemm.gemm, p.m));
}

std::string small_partial_reason(const MatmulReduceProblem& p, int64_t min_bytes,
                                 UnfusedSends sends) {
  const comm::Transport& t = find_comm(p.group).impl().transport();
  if (t.overlaps_compute()) {
    // What the unfused collective sends a peer (a rank's block of the fp32 partial, m·n / R
    // elements, or all of it) within one round (Transport::one_round_bytes): m·n <= parts ·
    // floor(one_round / 4), which no product overflows. W = 2 over TCP, matmul_all_reduce
    // 16×4096×512 bf16 (a 32 KiB partial, one-shot): fused 381-398 us, unfused 215-226 (AMX
    // Xeon). A two-shot all_reduce (two rounds) was not measured against the streams: left
    // to them.
    const int64_t parts = sends == UnfusedSends::kBlock ? p.world_size : 1;
    const auto limit = static_cast<int64_t>(t.one_round_bytes() / 4) * parts;
    if (p.world_size == 1 || p.n == 0 || p.m > limit / p.n) return "";
    return detail::cat("fp32 partial of ", p.m * p.n * 4, " bytes: the unfused ",
                       sends == UnfusedSends::kBlock ? "reduce_scatter" : "all_reduce",
                       " sends it with its descriptors over ", t.name(),
                       " (one round of messages; the stream takes two)");
  }
  // m·n·4 < min_bytes, as m < ceil(min_bytes / 4 / n): m·n may not fit an int64 product
  // with 4 (validated operands, large shapes).
  const int64_t min_elems = min_bytes / 4;
  if (p.n > 0 && p.m >= (min_elems + p.n - 1) / p.n) return "";
  return detail::cat("fp32 partial of ", p.m * p.n * 4, " bytes under ", min_bytes, " on ",
                     t.name(),
                     ", where nothing overlaps the GEMM: the stream's fixed costs per call "
                     "outweigh the passes it saves");
}

namespace {

size_t partial_gemm_workspace_bytes(const PartialShape& s) {
  return s.quantized ? quant_gemm_workspace_bytes(s.qgemm) : row_gemm_workspace_bytes(s.gemm);
}

}  // namespace

PartialShape partial_product_shape(const MatmulReduceProblem& p) {
  PartialShape s;
  const int64_t max_rows = std::max<int64_t>(1, p.m);  // LazyPartial's blocks, the unfused GEMM
  if (p.quant.quantized()) {
    s.quantized = true;
    QuantGemmShape& q = s.qgemm;
    q.q = p.quant;
    q.k = p.k;
    q.n = p.n;
    q.b = p.x2;
    q.c_dtype = DType::kFloat32;  // the dequantized partial; the bias comes after the sum
    q.max_rows = max_rows;
    plan_quant_gemm(q);
    return s;
  }
  RowGemmShape& g = s.gemm;
  g.dtype = p.dtype;
  g.k = p.k;
  g.n = p.n;
  g.b = p.x2;
  g.c_dtype = DType::kFloat32;
  g.max_rows = max_rows;
  plan_row_gemm(g);
  return s;
}

PlanKey plan_key(const char* op, const MatmulReduceProblem& p) {
  PlanKey key(op, p.group);
  key.add(p.rank).add(p.world_size).add(static_cast<int64_t>(p.dtype));
  key.add(static_cast<int64_t>(p.out_dtype)).add(p.m).add(p.k).add(p.n);
  key.add(p.x2).add(p.bias).add(p.quant).add(p.comm_turn);
  return key;
}

int add_bias_field(const MatmulReduceProblem& p, comm::CallSignature& s, bool digest) {
  s.add(digest ? "bias (a digest of its values)" : "bias", p.bias.data != nullptr ? 1 : 0,
        [](int64_t v) -> const char* { return v == 0 ? "none" : nullptr; });
  return p.bias.data != nullptr ? s.nfields - 1 : -1;
}

int64_t call_field_value(const MatmulReduceProblem& p) {
  return static_cast<int64_t>(
      comm::bytes_digest(p.bias.data, dtype_storage_bytes(p.bias.dtype, static_cast<size_t>(p.n))));
}

void bind_pointers(PartialShape& s, const MatmulReduceProblem& p) {
  if (s.quantized) {
    s.qgemm.q = p.quant;
    s.qgemm.b = p.x2;
  } else {
    s.gemm.b = p.x2;
  }
}

PartialGemm::PartialGemm(const PartialShape& s, const MatmulReduceProblem& p, void* workspace)
    : shape_(s),
      x1_(static_cast<const uint8_t*>(p.x1)),
      x1_row_bytes_(dtype_storage_bytes(p.dtype, static_cast<size_t>(p.k))),
      scales_{p.quant.x1_scale, p.quant.x1_per_token} {
  if (s.quantized)
    quant_.emplace(s.qgemm, workspace);
  else
    float_.emplace(s.gemm, workspace);
}

void PartialGemm::run(int64_t first, int64_t rows, float* c) const {
  const uint8_t* a = x1_ + static_cast<size_t>(first) * x1_row_bytes_;
  if (quant_)
    quant_->run(a, rows, scales_.from(first), c, nullptr);
  else
    float_->run(a, rows, c);
}

size_t matmul_reduce_workspace_bytes(const MatmulReduceProblem& p) {
  const size_t gemm = partial_gemm_workspace_bytes(partial_product_shape(p));
  return (gemm + sizeof(float) - 1) / sizeof(float) * sizeof(float) +
         static_cast<size_t>(p.n + p.m * p.n) * sizeof(float);
}

float* matmul_reduce_partial(const PartialShape& s, const MatmulReduceProblem& p, void* workspace) {
  return matmul_reduce_bias32(s, workspace) + p.n;
}

LazyPartial::LazyPartial(const PartialGemm& gemm, const MatmulReduceProblem& p, float* partial,
                         int ranges, int64_t range_rows, bool split)
    : gemm_(gemm),
      n_(p.n),
      partial_(partial),
      range_rows_(range_rows),
      // x2's element count is an int64 (validated); its size as fp32 may not be.
      block_rows_(p.k * p.n <= kCachedX2Bytes / 4 ? kBlockRowsCached : kBlockRowsStreamed),
      ranges_(ranges),
      done_(static_cast<size_t>(ranges)),
      split_(split) {}

const float* LazyPartial::rows(int r, int64_t row, int64_t rows) {
  CF_ASSERT(row >= 0 && rows >= 0 && row + rows <= range_rows_);
  if (!split_ && done_[r] < row + rows) {
    gemm_.run(0, ranges_ * range_rows_, partial_);
    std::fill(done_.data(), done_.data() + ranges_, range_rows_);
  }
  int64_t& done = done_[r];
  while (done < row + rows) {
    const int64_t count = std::min(block_rows_, range_rows_ - done);
    const int64_t first = r * range_rows_ + done;
    gemm_.run(first, count, partial_ + first * n_);
    done += count;
    exec::between_blocks();  // the peers' pieces move while this rank computes the next block
  }
  return partial_ + (r * range_rows_ + row) * n_;
}

float* matmul_reduce_bias32(const PartialShape& s, void* workspace) {
  const size_t gemm = partial_gemm_workspace_bytes(s);
  return static_cast<float*>(workspace) + (gemm + sizeof(float) - 1) / sizeof(float);
}

uint64_t matmul_reduce_piece_bytes(const MatmulReduceProblem& p, int64_t rows) {
  const uint64_t row_bytes = static_cast<uint64_t>(p.n) * sizeof(float);
  if (p.comm_turn > 0)
    return static_cast<uint64_t>((rows + p.comm_turn - 1) / p.comm_turn) * row_bytes;
  return uint64_t{1} << 20;
}

void reduce_scatter_partials(const MatmulReduceProblem& p, const PartialGemm& gemm,
                             comm::CommImpl& comm, void* workspace, void* out_rows) {
  float* bias32 = matmul_reduce_bias32(gemm.shape(), workspace);
  widen_bias(p.bias, p.n, bias32);
  const int64_t rows_per_rank = p.m / p.world_size;
  const uint64_t row_bytes = static_cast<uint64_t>(p.n) * sizeof(float);
  const uint64_t out_row_bytes = dtype_storage_bytes(p.out_dtype, static_cast<size_t>(p.n));
  auto* out = static_cast<uint8_t*>(out_rows);

  comm::AllToAllStream as;
  as.bytes = static_cast<uint64_t>(rows_per_rank) * row_bytes;
  as.unit = row_bytes;
  as.max_piece = matmul_reduce_piece_bytes(p, rows_per_rank);
  LazyPartial partial(gemm, p, matmul_reduce_partial(gemm.shape(), p, workspace), p.world_size,
                      rows_per_rank, comm.transport().overlaps_compute());
  // Held by reference (std::ref): a std::function holding these lambdas of several
  // references would allocate each call, a cost a tiny op measures.
  auto pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) {
    kernels::cpu::copy(dst,
                       partial.rows(to, static_cast<int64_t>(off / row_bytes),
                                    static_cast<int64_t>(n / row_bytes)),
                       n);
  };
  auto view = [&](int to, uint64_t off, uint64_t n) {
    return reinterpret_cast<const uint8_t*>(partial.rows(to, static_cast<int64_t>(off / row_bytes),
                                                         static_cast<int64_t>(n / row_bytes)));
  };
  auto on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
    const auto* const* fparts = reinterpret_cast<const float* const*>(parts);
    sum_bias_round(fparts, p.world_size, static_cast<int64_t>(n / row_bytes), p.n,
                   p.bias.data != nullptr ? bias32 : nullptr, out + off / row_bytes * out_row_bytes,
                   p.out_dtype);
  };
  as.pack = std::ref(pack);
  as.view = std::ref(view);
  as.on_all = std::ref(on_all);
  exec::all_to_all_stream(comm.transport(), as);
}

}  // namespace commfuse::ops
