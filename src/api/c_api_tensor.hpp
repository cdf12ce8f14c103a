// The C tensor descriptors (commfuseCreateTensor): handles (c_api_handles.hpp) that every
// op's C entry points look their arguments up by.
#pragma once

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <memory>
#include <optional>

#include "api/c_api_handles.hpp"

// The C tensor descriptor: a TensorView, and the packed form of the tensor when it is an x2
// with one attached (commfuseSetTensorPackedWeight), kept alive while attached.
struct commfuseTensor {
  commfuse::TensorView view;
  std::shared_ptr<const commfuse::PackedWeight> packed;
};

namespace commfuse::api {

HandleTable<commfuseTensor>& tensors();

// The descriptor behind t (an argument named arg of the call `where`): PARAM_NULLPTR for
// null, PARAM_INVALID naming arg if t is not a live descriptor.
std::shared_ptr<commfuseTensor> live_tensor(const commfuseTensor_t* t, const char* where,
                                            const char* arg);
// The same, but null for null (an optional argument left out).
std::shared_ptr<commfuseTensor> tensor_or_null(const commfuseTensor_t* t, const char* where,
                                               const char* arg);
// Its view; absent (ndim 0) for null, which the op rejects where the tensor is required.
TensorView tensor_view(const commfuseTensor_t* t, const char* where, const char* arg);
std::optional<TensorView> optional_tensor_view(const commfuseTensor_t* t, const char* where,
                                               const char* arg);
// An x2 argument: its view (absent for null) and the packed form attached to it (null: none),
// which the executor planned from it keeps alive.
struct WeightArg {
  TensorView view;
  std::shared_ptr<const PackedWeight> packed;
};
WeightArg weight_arg(const commfuseTensor_t* t, const char* where, const char* arg);

}  // namespace commfuse::api
