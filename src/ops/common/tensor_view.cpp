// commfuse::TensorView: the public non-owning tensor descriptor.
#include <commfuse/commfuse.hpp>

#include <utility>

#include "core/error.hpp"

namespace commfuse {

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
    stride *= shape[i];
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
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

}  // namespace commfuse
