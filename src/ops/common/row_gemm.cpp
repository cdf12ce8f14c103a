#include "ops/common/row_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "core/convert_fast.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/half_gemm_model.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {
namespace {

bool needs_widening(const RowGemmShape& s) {
  if (s.planned) return s.widen;
  if (s.dtype == DType::kFloat32) return false;
  // Ask the GEMM layer whether it would widen this dtype (no native oneDNN kernel here).
  const int64_t rows = s.max_rows > 0 ? s.max_rows : int64_t{1} << 20;
  kernels::cpu::MatmulDesc probe = kernels::cpu::dense_matmul_desc(rows, s.k, s.n, s.dtype);
  return kernels::cpu::widens_inputs(*kernels::cpu::plan_matmul(probe));
}

void widen(const void* src, DType t, float* dst, size_t count) {
  const auto* p = static_cast<const uint16_t*>(src);
  if (t == DType::kFloat16)
    fast::f16_to_f32(p, dst, count);
  else
    fast::bf16_to_f32(p, dst, count);
}

// Grows, never shrinks: per calling thread, so concurrent executes never share it.
float* thread_buffer(int which, size_t count) {
  thread_local std::unique_ptr<float[]> buf[2];
  thread_local size_t cap[2] = {0, 0};
  if (count > cap[which]) {
    buf[which] = std::make_unique_for_overwrite<float[]>(count);
    cap[which] = count;
  }
  return buf[which].get();
}

// Whether this execute packs b once: it runs several GEMMs over b (blocks multiplied on
// arrival, max_rows 0) or one of many rows; never when b is widened (then the fp32 copy is
// what the GEMM reads) or transposed. COMMFUSE_PACK_X2 pins it for tests and comparisons.
bool wants_packed(const RowGemmShape& s) {
  if (s.widen || s.b.transposed || s.dtype == DType::kFloat32 || s.k <= 0 || s.n <= 0) return false;
  return kernels::cpu::packing_pays(s.max_rows);
}

}  // namespace

size_t row_gemm_workspace_bytes(const RowGemmShape& s) {
  if (s.packed) return s.prepacked ? 0 : s.packed->bytes;
  if (!needs_widening(s)) return 0;
  return static_cast<size_t>(s.k * s.n + s.n) * sizeof(float);
}

RowGemm::RowGemm(const RowGemmShape& s, void* workspace) : s_(s), widened_(needs_widening(s)) {
  b_ = s.b.data;
  bias_ = s.bias.data;
  if (s.prepacked) {
    CF_ASSERT(s.b.prepacked != nullptr && !widened_);
    packed_b_ = s.b.prepacked->data();
  } else if (s.packed) {
    CF_ASSERT(workspace != nullptr && !widened_);
    trace::Span span("pack x2", "row_gemm", -1, static_cast<uint64_t>(s.k * s.n));
    kernels::cpu::pack_b(*s.packed, s.b.data, s.k, s.n, s.b.ld, workspace);
    packed_b_ = workspace;
  }
  if (!widened_) return;
  CF_ASSERT(workspace != nullptr);
  trace::Span span("widen x2", "row_gemm", -1, static_cast<uint64_t>(s.k * s.n));
  auto* b32 = static_cast<float*>(workspace);
  const int64_t rows = s.b.transposed ? s.n : s.k;
  const int64_t cols = s.b.transposed ? s.k : s.n;
  const auto* src = static_cast<const uint16_t*>(s.b.data);
  for (int64_t r = 0; r < rows; ++r)
    widen(src + r * s.b.ld, s.dtype, b32 + r * cols, static_cast<size_t>(cols));
  b_ = b32;
  if (s.bias.data != nullptr) {
    float* bias32 = b32 + s.k * s.n;
    if (s.bias.dtype == DType::kFloat32)
      std::memcpy(bias32, s.bias.data, static_cast<size_t>(s.n) * sizeof(float));
    else
      widen(s.bias.data, s.bias.dtype, bias32, static_cast<size_t>(s.n));
    bias_ = bias32;
  }
}

// The descriptor of one GEMM on `rows` rows. Widened operands are dense fp32 copies in the
// workspace (b's row stride is then its dense width).
kernels::cpu::MatmulDesc gemm_desc(const RowGemmShape& s, bool widened, int64_t rows) {
  kernels::cpu::MatmulDesc d;
  d.m = rows;
  d.k = s.k;
  d.n = s.n;
  d.a_dtype = d.b_dtype = widened ? DType::kFloat32 : s.dtype;
  d.b_transposed = s.b.transposed;
  d.lda = s.k;
  d.ldb = widened ? (s.b.transposed ? s.k : s.n) : s.b.ld;
  d.ldc = s.n;
  d.c_dtype = widened ? DType::kFloat32 : s.c_dtype;
  d.has_bias = s.bias.data != nullptr;
  d.bias_dtype = widened ? DType::kFloat32 : s.bias.dtype;
  return d;
}

namespace {

// The GEMM plan of a block of `rows` rows, over the packed x2 where that plan reads its
// layout (*packed set). A prepacked x2's plan is asked as for a row-major x2 whatever the
// source's layout: the packed bytes are the same.
std::shared_ptr<const kernels::cpu::MatmulPlan> block_plan(const RowGemmShape& s, bool widened,
                                                           int64_t rows, bool* packed) {
  *packed = false;
  const kernels::cpu::MatmulDesc d = gemm_desc(s, widened, rows);
  if (!s.packed) return kernels::cpu::plan_matmul(d);
  if (!s.prepacked) return kernels::cpu::plan_matmul_over(d, &*s.packed, packed);
  kernels::cpu::MatmulDesc over = d;
  over.b_transposed = false;
  over.ldb = s.n;
  over.b_packed = true;
  auto plan = kernels::cpu::plan_matmul(over);
  const kernels::cpu::PackedLayout* reads = kernels::cpu::packed_b_layout(*plan);
  if (reads != nullptr && *reads == *s.packed) {
    *packed = true;
    return plan;
  }
  return kernels::cpu::plan_matmul(d);
}

}  // namespace

void plan_row_gemm(RowGemmShape& s) {
  s.planned = false;
  s.packed.reset();
  s.prepacked = false;
  s.widen = needs_widening(s);
  if (s.b.prepacked != nullptr && !s.widen && s.b.prepacked->dtype == s.dtype) {
    s.packed = s.b.prepacked->layout;  // check_packed_x2 passes only packed forms
    s.prepacked = true;
  } else if (wants_packed(s)) {
    // The layout of a max_rows-row block (or of a typical arriving block): blocks of other
    // sizes use it where their plan asks for the same layout (RowGemm::gemm).
    s.packed = kernels::cpu::layout_for(
        gemm_desc(s, false, s.max_rows > 0 ? s.max_rows : (s.block_rows > 0 ? s.block_rows : 256)));
  }
  s.full_block_packed = false;
  s.full_block = s.max_rows > 0 && s.k > 0 && s.n > 0
                     ? block_plan(s, s.widen, s.max_rows, &s.full_block_packed)
                     : nullptr;
  s.planned = true;
}

std::string describe_row_gemm(const RowGemmShape& s, int64_t rows) {
  const bool widened = needs_widening(s);
  bool packed = false;
  std::string text =
      kernels::cpu::describe(*block_plan(s, widened, std::max<int64_t>(rows, 1), &packed));
  if (s.prepacked)
    text += packed ? ", x2 prepacked (PackedWeight)"
                   : ", x2 read as given (this GEMM's plan does not read PackedWeight's layout)";
  // The plan is of the fp32 GEMM when this layer widens: say so in the plan's own words.
  if (widened)
    text += detail::cat(
        ", ", dtype_name(s.dtype), " widened to float32 (",
        kernels::cpu::half_gemm_model(s.dtype).native ? "fp32 faster here" : "no native kernel",
        ")");
  return text;
}

size_t RowGemm::staging_bytes(const RowGemmShape& s, int64_t rows) {
  const DType t = needs_widening(s) ? DType::kFloat32 : s.dtype;
  return dtype_storage_bytes(t, static_cast<size_t>(rows * s.k));
}

void RowGemm::copy_rows(const void* a, int64_t rows, void* dst, void* a_copy) const {
  const size_t row_bytes = dtype_storage_bytes(s_.dtype, static_cast<size_t>(s_.k));
  if (!widened_) {
    if (a_copy != nullptr) kernels::cpu::copy(a_copy, a, row_bytes * static_cast<size_t>(rows));
    if (dst != a) kernels::cpu::copy(dst, a, row_bytes * static_cast<size_t>(rows));
    return;
  }
  // Row by row: the copy to gather_out and the widening read the row while it is in L1.
  trace::Span span("copy+widen", "row_gemm", -1, static_cast<uint64_t>(rows));
  const auto* src = static_cast<const uint8_t*>(a);
  auto* copy = static_cast<uint8_t*>(a_copy);
  auto* a32 = static_cast<float*>(dst);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = src + static_cast<size_t>(r) * row_bytes;
    if (copy != nullptr)
      kernels::cpu::copy(copy + static_cast<size_t>(r) * row_bytes, row, row_bytes);
    widen(row, s_.dtype, a32 + r * s_.k, static_cast<size_t>(s_.k));
  }
}

void RowGemm::gemm(const void* a_ready, int64_t rows, void* c) const {
  if (rows == 0) return;
  // The packed b where this block's plan reads the layout it was packed in; b otherwise
  // (a plan for another row count may have chosen another layout, or none).
  bool packed = s_.full_block_packed && rows == s_.max_rows;
  // The planned block's plan by plain pointer (the shape holds it): copying the shared_ptr
  // cost two atomic operations per call, which a 1-row call measures.
  const kernels::cpu::MatmulPlan* plan = s_.full_block.get();
  std::shared_ptr<const kernels::cpu::MatmulPlan> other;  // a plan for another row count
  if (plan == nullptr || rows != s_.max_rows) {
    other = block_plan(s_, widened_, rows, &packed);
    plan = other.get();
  }
  const void* b = packed ? packed_b_ : b_;
  trace::Span span("gemm", "row_gemm", -1, static_cast<uint64_t>(rows));
  if (!widened_ || s_.c_dtype == DType::kFloat32) {
    kernels::cpu::matmul(*plan, a_ready, b, bias_, c);
    return;
  }
  float* c32 = thread_buffer(1, static_cast<size_t>(rows * s_.n));
  kernels::cpu::matmul(*plan, a_ready, b, bias_, c32);
  auto* out = static_cast<uint16_t*>(c);
  if (s_.c_dtype == DType::kFloat16)
    fast::f32_to_f16(c32, out, static_cast<size_t>(rows * s_.n));
  else
    fast::f32_to_bf16(c32, out, static_cast<size_t>(rows * s_.n));
}

void RowGemm::run(const void* a, int64_t rows, void* c, void* a_copy) const {
  if (rows == 0) return;
  if (!widened_) {
    copy_rows(a, rows, const_cast<void*>(a), a_copy);  // only the gather_out copy
    gemm(a, rows, c);
    return;
  }
  float* a32 = thread_buffer(0, static_cast<size_t>(rows * s_.k));
  copy_rows(a, rows, a32, a_copy);
  gemm(a32, rows, c);
}

void RowGemm::stage(const void* a, int64_t rows, int64_t at_row, void* staging,
                    void* a_copy) const {
  const DType t = widened_ ? DType::kFloat32 : s_.dtype;
  auto* dst =
      static_cast<uint8_t*>(staging) + dtype_storage_bytes(t, static_cast<size_t>(at_row * s_.k));
  copy_rows(a, rows, dst, a_copy);
}

void RowGemm::run_staged(const void* staging, int64_t rows, void* c) const {
  gemm(staging, rows, c);
}

}  // namespace commfuse::ops
