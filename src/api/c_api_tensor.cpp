// The C tensor descriptors' table and the look-ups of the op entry points' arguments.
#include "api/c_api_tensor.hpp"

namespace commfuse::api {

HandleTable<commfuseTensor>& tensors() {
  static auto* const table = new HandleTable<commfuseTensor>;
  return *table;
}

std::shared_ptr<commfuseTensor> live_tensor(const commfuseTensor_t* t, const char* where,
                                            const char* arg) {
  return live_handle(tensors(), t, where, arg, "tensor descriptor", "commfuseCreateTensor");
}

std::shared_ptr<commfuseTensor> tensor_or_null(const commfuseTensor_t* t, const char* where,
                                               const char* arg) {
  return t != nullptr ? live_tensor(t, where, arg) : nullptr;
}

TensorView tensor_view(const commfuseTensor_t* t, const char* where, const char* arg) {
  const auto d = tensor_or_null(t, where, arg);
  return d != nullptr ? d->view : TensorView{};
}

std::optional<TensorView> optional_tensor_view(const commfuseTensor_t* t, const char* where,
                                               const char* arg) {
  const auto d = tensor_or_null(t, where, arg);
  if (d == nullptr) return std::nullopt;
  return d->view;
}

WeightArg weight_arg(const commfuseTensor_t* t, const char* where, const char* arg) {
  const auto d = tensor_or_null(t, where, arg);
  if (d == nullptr) return {};
  return {d->view, d->packed};
}

}  // namespace commfuse::api
