#include "ops/common/tensor_checks.hpp"

#include <cstdlib>
#include <iterator>
#include <utility>

#include "ops/common/quant_operands.hpp"
#include "ops/common/tensor_size.hpp"

namespace commfuse::ops {
namespace {

bool known_dtype(DType t) {
  try {
    dtype_bits(t);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::string shape_str(const TensorView& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim; ++i) s += detail::cat(i ? ", " : "", t.shape[i]);
  return s + (t.ndim == 1 ? ",)" : ")");
}

Device check_devices(const OpContext& ctx, std::initializer_list<NamedTensor> tensors) {
  Device first;
  const char* first_name = nullptr;
  for (const NamedTensor& nt : tensors) {
    if (nt.t == nullptr || !nt.t->present()) continue;
    const Device d = nt.t->device;
    if ((d.type != DeviceType::kCpu && d.type != DeviceType::kCuda) || d.index < 0 ||
        (d.type == DeviceType::kCpu && d.index != 0))
      ctx.invalid(nt.name, "'s device (type ", static_cast<int>(d.type), ", index ", d.index,
                  ") is not cpu or cuda:<index >= 0>");
    if (first_name == nullptr) {
      first = d;
      first_name = nt.name;
    } else if (d != first) {
      ctx.invalid(nt.name, " is on ", device_name(d), " but ", first_name, " is on ",
                  device_name(first), " (every tensor of a call on one device)");
    }
  }
  return first;
}

void check_present(const OpContext& ctx, const char* name, const TensorView& t) {
  if (!t.present()) ctx.reject(Status::kParamNullptr, name, " is null");
  if (t.ndim > TensorView::kMaxDims)
    ctx.invalid(name, " has ", t.ndim, " dims (at most ", TensorView::kMaxDims, ")");
  if (!known_dtype(t.dtype))
    ctx.invalid(name, " dtype value ", static_cast<int>(t.dtype), " is not a commfuse dtype");
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0) ctx.invalid(name, " dim ", i, " is ", t.shape[i], " (negative)");
  if (!size_fits_int64(t))
    ctx.invalid(name, " shape ", shape_str(t), " holds more than 2^63 - 1 bytes of ",
                dtype_name(t.dtype));
  if (!span_fits_int64(t)) {
    std::string strides;
    for (int i = 0; i < t.ndim; ++i) strides += detail::cat(i ? ", " : "", t.strides[i]);
    ctx.invalid(name, " strides (", strides, ") for shape ", shape_str(t),
                " span more than 2^63 - 1 bytes of ", dtype_name(t.dtype));
  }
  if (t.data == nullptr && t.numel() > 0)
    ctx.reject(Status::kParamNullptr, name, " data is null (shape ", shape_str(t), ")");
}

void check_float_dtype(const OpContext& ctx, const char* name, const TensorView& t) {
  if (t.dtype != DType::kFloat16 && t.dtype != DType::kBFloat16 && t.dtype != DType::kFloat32)
    ctx.invalid(name, " dtype is ", dtype_name(t.dtype),
                " but must be float16, bfloat16 or float32");
}

void check_same_dtype(const OpContext& ctx, const char* name, const TensorView& t,
                      const char* ref_name, DType ref) {
  if (t.dtype != ref)
    ctx.invalid(name, " dtype is ", dtype_name(t.dtype), " but ", ref_name, " dtype is ",
                dtype_name(ref), " (must match)");
}

void check_ndim(const OpContext& ctx, const char* name, const TensorView& t, int ndim) {
  if (t.ndim != ndim)
    ctx.invalid(name, " must be ", ndim, "-D but has shape ", shape_str(t), " (", t.ndim, "-D)");
}

void check_contiguous(const OpContext& ctx, const char* name, const TensorView& t) {
  // No elements, no layout (PyTorch's rule too): the shape checks say what is wrong (a
  // (3, 0) x1 read "dim 0 stride 1, expected 0" instead of "k is 0 but must be >= 1").
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] == 0) return;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    // A dim of size 1 has no meaningful stride (PyTorch's rule too).
    if (t.shape[i] != 1 && t.strides[i] != expect)
      ctx.invalid(name, " must be row-major contiguous (shape ", shape_str(t), ", dim ", i,
                  " stride ", t.strides[i], ", expected ", expect, ")");
    expect *= t.shape[i];
  }
}

namespace {

// The bytes [begin, end) a tensor's elements span (strides in elements, non-negative after
// validation); begin == end when it has none.
std::pair<uintptr_t, uintptr_t> byte_span(const TensorView& t) {
  const auto begin = reinterpret_cast<uintptr_t>(t.data);
  if (t.data == nullptr || t.ndim <= 0) return {begin, begin};
  uint64_t last = 0;  // offset of the last element, in elements
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] <= 0) return {begin, begin};
    if (t.shape[i] == 1) continue;  // its stride, never stepped, may be anything (INT64_MIN)
    last += static_cast<uint64_t>(t.shape[i] - 1) * static_cast<uint64_t>(std::abs(t.strides[i]));
  }
  return {begin, begin + dtype_storage_bytes(t.dtype, last + 1)};
}

}  // namespace

bool share_bytes(const TensorView& a, const TensorView& b) {
  const auto [a0, a1] = byte_span(a);
  const auto [b0, b1] = byte_span(b);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

void check_disjoint(const OpContext& ctx, std::initializer_list<NamedTensor> outputs,
                    std::initializer_list<NamedTensor> inputs) {
  for (auto o = outputs.begin(); o != outputs.end(); ++o) {
    if (o->t == nullptr) continue;
    for (const NamedTensor& in : inputs)
      if (in.t != nullptr && share_bytes(*o->t, *in.t))
        ctx.invalid(o->name, " and ", in.name, " share memory (", o->name, " is written while ",
                    in.name, " is read: pass separate buffers)");
    for (auto other = std::next(o); other != outputs.end(); ++other)
      if (other->t != nullptr && share_bytes(*o->t, *other->t))
        ctx.invalid(o->name, " and ", other->name, " share memory (pass separate buffers)");
  }
}

void check_shape(const OpContext& ctx, const char* name, const TensorView& t,
                 std::initializer_list<int64_t> want, const char* meaning) {
  bool same = t.ndim == static_cast<int>(want.size());
  int i = 0;
  for (int64_t w : want) same = same && t.shape[i++] == w;
  if (!same) {
    TensorView w;
    w.ndim = static_cast<int>(want.size());
    i = 0;
    for (int64_t v : want) w.shape[i++] = v;
    ctx.invalid(name, " shape is ", shape_str(t), " but must be ", shape_str(w), " ", meaning);
  }
}

WeightLayout check_x2(const OpContext& ctx, const TensorView& x2, DType x1_dtype, int64_t k) {
  check_present(ctx, "x2", x2);
  check_ndim(ctx, "x2", x2, 2);
  check_matmul_x2_dtype(ctx, x2, x1_dtype);
  if (x2.shape[0] != k)
    ctx.invalid("x2 dim 0 is ", x2.shape[0], " but x1 dim ", 1, " is ", k, " (k must match)");
  WeightLayout w{x2.data, x2.shape[1], false, 0};
  if (w.n < 1) ctx.invalid("x2 dim 1 (n) is ", w.n, " but must be >= 1");
  if (!weight_layout(x2, w))
    ctx.invalid("x2 strides (", x2.strides[0], ", ", x2.strides[1], ") for shape ", shape_str(x2),
                " are neither row-major (k, n) nor a transposed (n, k) buffer");
  return w;
}

TensorView as_dense_x2(const TensorView& x2, bool* transposed) {
  if (x2.ndim != 2 || x2.dtype == DType::kInt4 || x2.strides[0] != 1 ||
      x2.strides[1] != x2.shape[0] || (x2.strides[1] == 1 && x2.strides[0] == x2.shape[1]))
    return x2;
  *transposed = !*transposed;
  return x2.t();
}

bool weight_layout(const TensorView& x2, WeightLayout& w) {
  const int64_t k = x2.shape[0], s0 = x2.strides[0], s1 = x2.strides[1];
  w.n = x2.shape[1];
  if ((s1 == 1 || w.n == 1) && s0 >= w.n && s0 >= 1) {
    w.transposed = false;  // (k, n) row-major, possibly a row block of a wider buffer
    w.ld = s0;
    return true;
  }
  if ((s0 == 1 || k == 1) && s1 >= k && s1 >= 1) {
    w.transposed = true;  // an (n, k) buffer viewed as (k, n)
    w.ld = s1;
    return true;
  }
  return false;
}

BiasArg check_bias(const OpContext& ctx, const std::optional<TensorView>& bias, DType x1_dtype,
                   int64_t n) {
  if (!bias || !bias->present()) return {};
  const TensorView& b = *bias;
  check_present(ctx, "bias", b);
  if (b.dtype != x1_dtype && b.dtype != DType::kFloat32)
    ctx.invalid("bias dtype is ", dtype_name(b.dtype), " but must be x1's (", dtype_name(x1_dtype),
                ") or float32");
  check_shape(ctx, "bias", b, {n}, "(n,)");
  check_contiguous(ctx, "bias", b);
  return {b.data, b.dtype};
}

void check_comm_turn(const OpContext& ctx, int64_t comm_turn) {
  if (comm_turn < 0 || comm_turn > 64)
    ctx.invalid("comm_turn is ", comm_turn, " but must be 0 (automatic) or 1..64");
}

void check_reduce_op(const OpContext& ctx, std::string_view reduce_op) {
  if (reduce_op.data() == nullptr) ctx.reject(Status::kParamNullptr, "reduce_op is null");
  if (reduce_op != "sum")
    ctx.invalid("reduce_op is '", reduce_op, "' but only \"sum\" is supported");
}

void check_world_size(const OpContext& ctx, int world_size) {
  if (world_size != ctx.world_size())
    ctx.invalid("world_size is ", world_size, " but group has ", ctx.world_size(), " ranks");
}

}  // namespace commfuse::ops
