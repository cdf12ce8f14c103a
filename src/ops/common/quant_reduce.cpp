#include "ops/common/quant_reduce.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/small_vector.hpp"
#include "exec/stream.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::ops {

std::string describe_problem(const char* op, const QuantReduceProblem& p) {
  return detail::cat(op, "(rank ", p.rank, ") rows=", p.rows, " h=", p.h, " ",
                     dtype_name(p.x_dtype), " -> ", dtype_name(p.out_dtype), " R=", p.world_size,
                     " on ", p.transport);
}

PlanKey plan_key(const char* op, const QuantReduceProblem& p) {
  PlanKey key(op, p.group);
  key.add(p.rank).add(p.world_size).add(p.transport).add(static_cast<int64_t>(p.x_dtype));
  key.add(static_cast<int64_t>(p.kind)).add(p.rows).add(p.h);
  key.add(static_cast<int64_t>(p.out_dtype)).add(p.threads);
  return key;
}
namespace {

using kernels::cpu::ScaleKind;

bool is_quant_code(DType t) {
  return t == DType::kInt8 || t == DType::kHiFloat8 || t == DType::kFloat8E4M3FN ||
         t == DType::kFloat8E5M2;
}

}  // namespace

QuantReduceProblem validate_quant_operands(const OpContext& ctx, const TensorView& x,
                                           const TensorView& scales, std::string_view reduce_op) {
  check_reduce_op(ctx, reduce_op);
  check_present(ctx, "x", x);
  if (!is_quant_code(x.dtype))
    ctx.invalid("x dtype is ", dtype_name(x.dtype),
                " but must be int8, hifloat8, float8_e4m3fn or float8_e5m2");
  if (x.ndim != 2 && x.ndim != 3)
    ctx.invalid("x must be 2-D (bs, H) or 3-D (b, s, H) but has shape ", shape_str(x));
  for (int i = 0; i < x.ndim; ++i)
    if (x.shape[i] == 0)
      ctx.invalid("x dim ", i, " is 0 (shape ", shape_str(x), "): empty tensors are not accepted");
  check_contiguous(ctx, "x", x);

  QuantReduceProblem p;
  p.group = ctx.comm().name();
  p.rank = ctx.rank();
  p.world_size = ctx.world_size();
  p.transport = ctx.comm().transport().name();
  p.threads = std::max(1, kernels::cpu::compute_threads());
  p.x_dtype = x.dtype;
  p.h = x.shape[x.ndim - 1];
  p.rows = x.numel() / p.h;
  p.x = static_cast<const uint8_t*>(x.data);

  check_present(ctx, "scales", scales);
  if (scales.dtype == DType::kFloat32) {
    p.kind = ScaleKind::kGroup128;
  } else if (scales.dtype == DType::kFloat8E8M0) {
    p.kind = ScaleKind::kMx32;
    if (x.dtype != DType::kFloat8E4M3FN && x.dtype != DType::kFloat8E5M2)
      ctx.invalid("x dtype ", dtype_name(x.dtype),
                  " with float8_e8m0 scales (MX) is not supported: MX takes float8_e4m3fn or "
                  "float8_e5m2");
  } else {
    ctx.invalid("scales dtype is ", dtype_name(scales.dtype),
                " but must be float32 (per-token-group, K-G) or float8_e8m0 (MX)");
  }
  const bool mx = p.kind == ScaleKind::kMx32;
  const int64_t div = mx ? 64 : 128;
  if (p.h % div != 0)
    ctx.invalid("x dim ", x.ndim - 1, " (H) is ", p.h, " but must be a multiple of ", div,
                mx ? " (MX scales)" : " (K-G scales, group 128)");

  // K-G: x's leading dims + (H/128); MX: x's leading dims + (H/64, 2).
  const int want_ndim = x.ndim - 1 + (mx ? 2 : 1);
  const char* layout = mx ? (x.ndim == 2 ? "(bs, H/64, 2)" : "(b, s, H/64, 2)")
                          : (x.ndim == 2 ? "(bs, H/128)" : "(b, s, H/128)");
  if (scales.ndim != want_ndim)
    ctx.invalid("scales must be ", want_ndim, "-D ", layout, " but has shape ", shape_str(scales));
  for (int i = 0; i < x.ndim - 1; ++i)
    if (scales.shape[i] != x.shape[i])
      ctx.invalid("scales dim ", i, " is ", scales.shape[i], " but x dim ", i, " is ", x.shape[i],
                  " (must match)");
  const int last = x.ndim - 1;
  if (scales.shape[last] != p.h / div)
    ctx.invalid("scales dim ", last, " is ", scales.shape[last], " but must be H/", div, " = ",
                p.h / div);
  if (mx && scales.shape[last + 1] != 2)
    ctx.invalid("scales dim ", last + 1, " is ", scales.shape[last + 1],
                " but must be 2 (MX scales are (…, H/64, 2))");
  check_contiguous(ctx, "scales", scales);
  p.scales = static_cast<const uint8_t*>(scales.data);
  return p;
}

void check_quant_output(const OpContext& ctx, const TensorView& output) {
  check_present(ctx, "output", output);
  check_float_dtype(ctx, "output", output);
  check_contiguous(ctx, "output", output);
}

void pack_rows(const QuantReduceProblem& p, int64_t row0, int64_t n_rows, uint8_t* dst) {
  const int64_t sb = p.scale_bytes();
  const uint8_t* x = p.x + row0 * p.h;
  const uint8_t* s = p.scales + row0 * sb;
  for (int64_t i = 0; i < n_rows; ++i) {
    kernels::cpu::copy(dst, x, static_cast<size_t>(p.h));
    std::memcpy(dst + p.h, s, static_cast<size_t>(sb));
    dst += p.h + sb;
    x += p.h;
    s += sb;
  }
}

namespace {

// Rank r's row i: codes at codes[r] + i·code_stride, scales at scales[r] + i·scale_stride.
void sum_rows_strided(const QuantReduceProblem& p, const uint8_t* const* codes,
                      const uint8_t* const* scales, int64_t code_stride, int64_t scale_stride,
                      int64_t n_rows, void* out, SumScratch scratch) {
  const size_t out_row_bytes = static_cast<size_t>(p.h) * (dtype_bits(p.out_dtype) / 8);
  [[maybe_unused]] const int threads = n_rows >= 2 * p.threads ? p.threads : 1;  // tsan: no OpenMP
  // float32 output is its own accumulator, summed in place, unless it streams: then each
  // row is summed in an accumulator row (in L1) and streamed out, sparing the reads of
  // output lines that are about to be overwritten (W = 2 over TCP, 4 Mi elements: 3.4 ->
  // 2.8 ms; 16 Mi: 20 -> 14 ms, AMX Xeon).
  const bool in_place = p.out_dtype == DType::kFloat32 && !scratch.stream;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n_rows; ++i) {
      uint8_t* dst = static_cast<uint8_t*>(out) + static_cast<size_t>(i) * out_row_bytes;
      float* a = in_place ? reinterpret_cast<float*>(dst)
                          : scratch.acc + static_cast<size_t>(omp_get_thread_num()) *
                                              static_cast<size_t>(p.h);
      for (int r = 0; r < p.world_size; ++r)
        kernels::cpu::dequant_accumulate_row(p.x_dtype, p.kind, codes[r] + i * code_stride,
                                             scales[r] + i * scale_stride, p.h, a, r == 0);
      if (in_place) continue;
      if (p.out_dtype == DType::kFloat32)
        kernels::cpu::stream_copy_unfenced(dst, a, out_row_bytes);
      else
        kernels::cpu::store_f32_as(a, dst, p.out_dtype, static_cast<size_t>(p.h));
    }
    // Each thread's streamed rows are visible before the region ends (its barrier).
    if (scratch.stream) kernels::cpu::stream_fence();
  }
}

}  // namespace

void sum_rows(const QuantReduceProblem& p, const uint8_t* const* parts, int64_t n_rows, void* out,
              SumScratch scratch) {
  SmallVector<const uint8_t*, 16> scales(static_cast<size_t>(p.world_size));
  for (int r = 0; r < p.world_size; ++r) scales[static_cast<size_t>(r)] = parts[r] + p.h;
  sum_rows_strided(p, parts, scales.data(), p.unit(), p.unit(), n_rows, out, scratch);
}

void sum_rows_apart(const QuantReduceProblem& p, const uint8_t* const* codes,
                    const uint8_t* const* scales, int64_t n_rows, void* out, SumScratch scratch) {
  sum_rows_strided(p, codes, scales, p.h, p.scale_bytes(), n_rows, out, scratch);
}

void dequantize_rows(const QuantReduceProblem& p, float* dst) {
  for (int64_t r = 0; r < p.rows; ++r)
    kernels::cpu::dequant_accumulate_row(p.x_dtype, p.kind, p.x + r * p.h,
                                         p.scales + r * p.scale_bytes(), p.h, dst + r * p.h, true);
}

bool stream_output(const QuantReduceProblem& p, int64_t out_elements) {
  return p.out_dtype == DType::kFloat32 && static_cast<uint64_t>(out_elements) * sizeof(float) >=
                                               kernels::cpu::nontemporal_copy_bytes();
}

size_t acc_bytes(const QuantReduceProblem& p, bool stream) {
  return p.out_dtype == DType::kFloat32 && !stream
             ? 0
             : static_cast<size_t>(p.threads) * static_cast<size_t>(p.h) * sizeof(float);
}

void reduce_own_block(const QuantReduceProblem& p, comm::Transport& transport, void* out,
                      SumScratch scratch) {
  const uint64_t unit = static_cast<uint64_t>(p.unit());
  const int64_t block_rows = p.rows / p.world_size;
  const size_t out_row_bytes = static_cast<size_t>(p.h) * (dtype_bits(p.out_dtype) / 8);
  comm::AllToAllStream as;
  as.bytes = static_cast<uint64_t>(block_rows) * unit;
  as.unit = unit;
  as.max_piece = quant_piece_bytes(p, transport);
  as.pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) {
    pack_rows(p, to * block_rows + static_cast<int64_t>(off / unit), static_cast<int64_t>(n / unit),
              dst);
  };
  as.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
    sum_rows(p, parts, static_cast<int64_t>(n / unit),
             static_cast<uint8_t*>(out) + off / unit * out_row_bytes, scratch);
  };
  exec::all_to_all_stream(transport, as);
}

uint64_t quant_piece_bytes(const QuantReduceProblem&, const comm::Transport&) {
  return 0;
}

}  // namespace commfuse::ops
