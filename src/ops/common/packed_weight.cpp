#include "ops/common/packed_weight.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/threads.hpp"
#include "ops/common/call_workspace.hpp"

namespace commfuse::ops {
namespace {

[[noreturn]] void bad_x2(const std::string& what) {
  detail::throw_status(Status::kParamInvalid, detail::cat("PackedWeight: x2 ", what));
}

// x2 as the ops accept it (check_x2's layouts), without an op to name.
void describe_source(PackedWeightImpl& w, const TensorView& x2) {
  if (x2.ndim != 2) bad_x2(detail::cat("must be 2-D (k, n) but has shape ", shape_str(x2)));
  if (x2.data == nullptr)
    detail::throw_status(Status::kParamNullptr, "PackedWeight: x2's data is null");
  if (x2.device.type != DeviceType::kCpu)
    bad_x2(detail::cat("is in ", device_name(x2.device),
                       " memory: not supported (PackedWeight takes host tensors only)"));
  if (x2.dtype != DType::kFloat32 && x2.dtype != DType::kFloat16 && x2.dtype != DType::kBFloat16 &&
      x2.dtype != DType::kInt8 && x2.dtype != DType::kInt4)
    bad_x2(detail::cat("dtype is ", dtype_name(x2.dtype),
                       " but must be float32, float16, bfloat16, int8 or int4 (fp8 and HiFloat8 "
                       "x2 are not supported)"));
  w.source = x2.data;
  w.dtype = x2.dtype;
  w.k = x2.shape[0];
  w.n = x2.shape[1];
  if (w.k < 1 || w.n < 1) bad_x2(detail::cat("shape ", shape_str(x2), " has an empty dim"));
  WeightLayout layout;
  if (!weight_layout(x2, layout))
    bad_x2(detail::cat("strides (", x2.strides[0], ", ", x2.strides[1], ") for shape ",
                       shape_str(x2),
                       " are neither row-major (k, n) nor a transposed (n, k) buffer"));
  w.transposed = layout.transposed;
  w.ld = layout.ld;
  // int4 x2 is unpacked whole, two values a byte, as the ops unpack it: dense only.
  if (w.dtype == DType::kInt4 && w.ld != (w.transposed ? w.k : w.n))
    bad_x2(detail::cat("is int4 with a leading dimension of ", w.ld, " for shape ", shape_str(x2),
                       ": an int4 x2 must be dense (", w.transposed ? "(n, k)" : "(k, n)",
                       " without padding)"));
}

// Host memory for the packed form, as the workspace's (call_workspace.hpp): the GEMM reads
// it in blocks strided over all of it, and ran 130 ms instead of 94 from 4 KiB pages
// (bf16, 32 MiB, AMX Xeon).
void allocate(PackedWeightImpl& w, size_t bytes) {
  const CallWorkspace::Memory memory = allocate_memory(bytes);
  w.buffer = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(memory.data),
                                      [memory](uint8_t*) { release_memory(memory); });
  w.bytes = bytes;
}

// int8 x2 (A8W8's and A16W8's weights) as the int GEMM of `rows` rows prepares it: packed
// into oneDNN's s8 blocked layout (VNNI / AMX), or without VNNI into int16 pairs for AVX2's
// vpmaddwd kernel (2 bytes an element) or widened to fp32 for the exact f32-blocked path (4
// bytes an element), as exact_int_matmul_path chose. The bounds are int8's (|a|, |b| <= 128), which
// every quantized op's plan satisfies; an op whose plan prepares x2 otherwise reads x2 as given.
// An int4 x2 (alltoall_quant_matmul A16W4's weights) comes here unpacked to int8, with the
// int4 ranges' bound (8), where oneDNN's s8 kernel is exact on every CPU: its s8 layout.
void prepare_int8(PackedWeightImpl& w, const int8_t* b, int64_t rows, int bound) {
  kernels::cpu::IntMatmulDesc& d = w.int_desc;
  d.m = rows;
  d.k = w.k;
  d.n = w.n;
  d.lda = w.k;
  d.ldb = w.ld;
  d.ldc = w.n;
  d.b_transposed = w.transposed;
  d.a_max = bound;
  d.b_max = bound;
  d.b_packed = true;
  auto plan = kernels::cpu::plan_int_matmul(d);
  w.int_threads = kernels::cpu::compute_threads();
  const size_t bytes = kernels::cpu::prepared_b_bytes(*plan);
  if (bytes == 0) {
    w.why_not = detail::cat("the int8 GEMM of ", rows,
                            " rows reads x2 as given here: ", kernels::cpu::describe(*plan));
    return;
  }
  allocate(w, bytes);
  trace::Span span("prepare x2", "packed_weight", -1, static_cast<uint64_t>(w.k * w.n));
  kernels::cpu::prepare_b(*plan, b, w.buffer.get());
  w.int_plan = std::move(plan);
}

}  // namespace

std::unique_ptr<PackedWeightImpl> pack_weight(const TensorView& x2, int64_t rows) {
  if (rows < 0)
    detail::throw_status(Status::kParamInvalid,
                         detail::cat("PackedWeight: rows is ", rows, " but must be >= 0 (0: 256)"));
  auto w = std::make_unique<PackedWeightImpl>();
  describe_source(*w, x2);
  // rows only picks the layout, and no operator's GEMM call multiplies more rows than
  // oneDNN's 32-bit sizes allow with this x2 (m·k and m·n): beyond that, that many. Passed on
  // as given, a huge rows (2^37 with a 64 x 64 int8 x2) crashed inside oneDNN (SIGFPE).
  constexpr int64_t kInt32Max = (int64_t{1} << 31) - 1;
  rows = rows > 0 ? std::min(rows, kInt32Max / std::max<int64_t>({1, w->k, w->n})) : 256;
  if (w->dtype == DType::kInt8) {
    prepare_int8(*w, static_cast<const int8_t*>(x2.data), rows, 128);
    return w;
  }
  if (w->dtype == DType::kInt4) {
    std::vector<int8_t> unpacked(static_cast<size_t>(w->k * w->n));
    unpack_int4(static_cast<const uint8_t*>(x2.data), unpacked.data(), unpacked.size());
    prepare_int8(*w, unpacked.data(), rows, 8);
    return w;
  }
  if (w->dtype == DType::kFloat32) {
    w->why_not = "float32 x2 is read as given (no packed layout for it)";
    return w;
  }
  // The layout the plan of a row-major x2 asks for; the packed bytes do not depend on how
  // the source was laid out.
  kernels::cpu::MatmulDesc d = kernels::cpu::dense_matmul_desc(rows, w->k, w->n, w->dtype);
  w->layout = kernels::cpu::layout_for(d);
  if (!w->layout) {
    // Its plan says why: no native 16-bit kernel (widened), the direct small-m kernel, ...
    w->why_not = detail::cat("the GEMM of ", d.m, " rows reads x2 as given here: ",
                             kernels::cpu::describe(*kernels::cpu::plan_matmul(d)));
    return w;
  }
  allocate(*w, w->layout->bytes);
  void* raw = w->buffer.get();
  trace::Span span("pack x2", "packed_weight", -1, static_cast<uint64_t>(w->k * w->n));
  if (w->transposed)
    kernels::cpu::pack_b_transposed(*w->layout, x2.data, w->k, w->n, w->ld, raw);
  else
    kernels::cpu::pack_b(*w->layout, x2.data, w->k, w->n, w->ld, raw);
  return w;
}

const PackedWeightImpl* check_packed_x2(const OpContext& ctx, const PackedWeight* packed,
                                        const TensorView& x2, const WeightLayout& w,
                                        Device device) {
  if (packed == nullptr) return nullptr;
  if (device.type != DeviceType::kCpu)
    ctx.invalid("packed_x2 with ", device_name(device),
                " tensors is not supported (host tensors only)");
  const PackedWeightImpl* impl = nullptr;
  try {
    impl = &packed->impl();
  } catch (const Error&) {
    ctx.invalid("packed_x2 is a moved-from PackedWeight (it holds nothing)");
  }
  const PackedWeightImpl& p = *impl;
  if (p.source != x2.data || p.dtype != x2.dtype || p.k != x2.shape[0] || p.n != w.n ||
      p.transposed != w.transposed || p.ld != w.ld)
    ctx.invalid("packed_x2 was packed from another x2 (", dtype_name(p.dtype), " (", p.k, ", ", p.n,
                ")", p.transposed ? " transposed" : "", " ld ", p.ld, " at ", p.source,
                ") than this call's (", dtype_name(x2.dtype), " ", shape_str(x2),
                w.transposed ? " transposed" : "", " ld ", w.ld, " at ", x2.data, ")");
  return p.packed() ? &p : nullptr;
}

const PackedWeightImpl* check_alltoall_packed_x2(const OpContext& ctx, const PackedWeight* packed,
                                                 const TensorView& x2, bool transpose_x2,
                                                 Device device) {
  if (packed == nullptr) return nullptr;
  // PackedWeight's own layout rule on that view (a dense x2 always has one).
  const TensorView view = transpose_x2 ? x2.t() : x2;
  WeightLayout w;
  if (!weight_layout(view, w)) ctx.invalid("x2's strides have no (R*H, N) layout");
  return check_packed_x2(ctx, packed, view, w, device);
}

}  // namespace commfuse::ops

namespace commfuse {

PackedWeight::PackedWeight(const TensorView& x2, int64_t rows)
    : impl_(ops::pack_weight(x2, rows)) {}
PackedWeight::~PackedWeight() = default;
PackedWeight::PackedWeight(PackedWeight&&) noexcept = default;
PackedWeight& PackedWeight::operator=(PackedWeight&&) noexcept = default;

const ops::PackedWeightImpl& PackedWeight::impl() const {
  if (!impl_)
    detail::throw_status(Status::kParamInvalid, "PackedWeight: used after being moved from");
  return *impl_;
}

bool PackedWeight::packed() const {
  return impl().packed();
}

size_t PackedWeight::packed_bytes() const {
  return impl().packed() ? impl().bytes : 0;
}

std::string PackedWeight::description() const {
  const ops::PackedWeightImpl& w = impl();
  std::string text = detail::cat("x2 ", dtype_name(w.dtype), " (", w.k, ", ", w.n, ")",
                                 w.transposed ? " transposed" : "", ": ");
  if (!w.packed()) return text + "not packed: " + w.why_not;
  if (w.int_plan)
    return text + detail::cat(w.dtype == DType::kInt4 ? "unpacked to int8 and " : "",
                              "prepared for the int8 GEMM of ", w.int_desc.m, " rows, ", w.bytes,
                              " bytes: ", kernels::cpu::describe(*w.int_plan));
  const auto& l = *w.layout;
  return text + detail::cat("packed, ", l.bytes, " bytes, blocks of ", l.k_block * l.pair, " k x ",
                            l.n_block, " n (pairs of ", l.pair, ")");
}

}  // namespace commfuse
