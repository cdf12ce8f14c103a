// TensorRef: one array argument as libcommfuse sees it. Made once per argument by
// commfuse/_tensor.py (the `_commfuse.TensorRef` constructor), it keeps the array alive and
// holds the TensorView over its memory: no copy, ever. Every operator binding takes its
// tensors as TensorRef, so the array rules (device, dtype, strides, int4 packing) live here
// once.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <commfuse/commfuse.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace commfuse::python {

// Any array nanobind can import: DLPack (torch, numpy, ...) or the buffer protocol.
using AnyArray = nanobind::ndarray<nanobind::ro>;

struct TensorRef {
  AnyArray array;           // keeps the memory alive while the call runs (a device op only
                            // queues its work: the caller keeps its arrays until it is done)
  TensorView view;          // logical dtype, shape and strides (elements) over array's data
  bool read_only = false;   // the caller said the array must not be written
  bool contiguous() const;  // row-major dense (size-1 dims ignored)
  size_t storage_bytes() const;
};

// dtype: a commfuse dtype name, or nullopt to take it from the array's own (DLPack) dtype.
// int4 is packed two per byte: an 8-bit (..., c) array is an int4 (..., 2c) tensor.
// A CUDA array's view says so (TensorView::device: the operators run on it; quantize,
// dequantize and the collectives reject it). Rejects (InvalidArgument) an array on another device,
// with more than TensorView::kMaxDims dims, or whose element type does not hold `dtype` (same type,
// or raw unsigned codes of its width).
TensorRef make_tensor_ref(AnyArray array, std::optional<std::string_view> dtype, bool read_only);

// For operator bindings: an output that must be writable and dense, checked on this rank and
// rejected through the communicator named `group` (aborting it, like every op argument error,
// so peers fail at once instead of waiting). `op` and `name` name the op and the argument.
void check_output(const char* op, std::string_view group, const char* name, const TensorRef& t);

// Rejects through the group named `group` when it exists (aborting it), else just throws.
[[noreturn]] void reject_in_group(std::string_view group, Status code, const std::string& message);

// The optional-tensor convention of TensorView: absent -> ndim 0.
inline TensorView view_or_absent(const TensorRef* t) {
  return t ? t->view : TensorView{};
}

}  // namespace commfuse::python
