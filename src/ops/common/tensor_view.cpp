// commfuse::TensorView: the public non-owning tensor descriptor.
#include <commfuse/commfuse.hpp>

#include <cstdlib>
#include <utility>

#include "core/dtype_valid.hpp"
#include "core/error.hpp"
#include "ops/common/tensor_checks.hpp"
#include "ops/common/tensor_size.hpp"

namespace commfuse {

std::string device_name(Device d) {
  switch (d.type) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kCuda:
      return detail::cat("cuda:", d.index);
  }
  return detail::cat("device type ", static_cast<int>(d.type));
}

TensorView::TensorView(const void* data_, DType dtype_, std::initializer_list<int64_t> shape_)
    : data(const_cast<void*>(data_)), dtype(dtype_) {
  CF_CHECK_ARG(shape_.size() <= static_cast<size_t>(kMaxDims), "TensorView: ", shape_.size(),
               " dims (at most ", kMaxDims, ")");
  ndim = static_cast<int>(shape_.size());
  int i = 0;
  for (int64_t d : shape_) shape[i++] = d;
  int64_t stride = 1;
  for (i = ndim - 1; i >= 0; --i) {
    strides[i] = stride;
    // The last product is never used as a stride, but its overflow is still overflow.
    CF_CHECK_ARG(!__builtin_mul_overflow(stride, shape[i], &stride), "TensorView: shape ",
                 ops::shape_str(*this), " has more than 2^63 - 1 elements");
  }
}

TensorView::TensorView(const void* data_, DType dtype_, std::initializer_list<int64_t> shape_,
                       std::initializer_list<int64_t> strides_)
    : TensorView(data_, dtype_, shape_) {
  CF_CHECK_ARG(strides_.size() == shape_.size(), "TensorView: ", strides_.size(), " strides for ",
               shape_.size(), " dims");
  int i = 0;
  for (int64_t s : strides_) strides[i++] = s;
}

TensorView TensorView::t() const {
  CF_CHECK_ARG(ndim == 2, "TensorView::t: needs a 2-D view, this one has ", ndim, " dims");
  TensorView v = *this;
  std::swap(v.shape[0], v.shape[1]);
  std::swap(v.strides[0], v.strides[1]);
  return v;
}

int64_t TensorView::numel() const {
  if (ndim == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i)
    if (__builtin_mul_overflow(n, shape[i], &n)) return INT64_MAX;
  return n;
}

namespace ops {

bool size_fits_int64(const TensorView& t) {
  const int bits = detail::dtype_is_valid(t.dtype) ? dtype_bits(t.dtype) : 8;
  int64_t elements = 1;
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] > 0 && __builtin_mul_overflow(elements, t.shape[i], &elements)) return false;
  return elements <= INT64_MAX / (bits >= 8 ? bits / 8 : 1);
}

bool span_fits_int64(const TensorView& t) {
  const int bits = detail::dtype_is_valid(t.dtype) ? dtype_bits(t.dtype) : 8;
  int64_t last = 0;  // the last element's offset, in elements
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return true;  // no element
    if (t.shape[i] == 1) continue;
    if (t.strides[i] == INT64_MIN) return false;
    int64_t step = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, std::abs(t.strides[i]), &step) ||
        __builtin_add_overflow(last, step, &last))
      return false;
  }
  return last < INT64_MAX / (bits >= 8 ? bits / 8 : 1);
}

}  // namespace ops

}  // namespace commfuse
