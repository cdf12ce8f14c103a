// C entry points of alltoall_quant_matmul and alltoall_matmul (aclnn's parameter lists, in
// aclnn's order) and commfuseIntArray.
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <memory>
#include <optional>
#include <vector>

#include "api/c_api_executor.hpp"
#include "api/c_api_guard.hpp"
#include "core/error.hpp"

struct commfuseIntArray {
  std::vector<int64_t> values;
};

namespace {

using commfuse::TensorView;
using commfuse::api::guarded;
using commfuse::api::optional_tensor_view;
using commfuse::api::tensor_or_null;
using commfuse::api::tensor_view;

commfuse::api::HandleTable<commfuseIntArray>& int_arrays() {
  static auto* const table = new commfuse::api::HandleTable<commfuseIntArray>;
  return *table;
}

std::optional<std::vector<int64_t>> optional_array(const commfuseIntArray_t* a, const char* fn,
                                                   const char* arg) {
  if (a == nullptr) return std::nullopt;
  return commfuse::api::live_handle(int_arrays(), a, fn, arg, "int array", "commfuseCreateIntArray")
      ->values;
}

}  // namespace

extern "C" {

commfuseIntArray_t* commfuseCreateIntArray(const int64_t* value, uint64_t size) {
  commfuseIntArray_t* out = nullptr;
  guarded("commfuseCreateIntArray", [&] {
    CF_CHECK_ARG(size <= 64, "commfuseCreateIntArray: size is ", size, " (at most 64)");
    if (size > 0)
      CF_CHECK_NOTNULL(value, "commfuseCreateIntArray: value is null (size ", size, ")");
    auto a = std::make_shared<commfuseIntArray>();
    if (size > 0) a->values.assign(value, value + size);
    out = int_arrays().add<commfuseIntArray_t>(std::move(a));
  });
  return out;
}

commfuseStatus_t commfuseDestroyIntArray(const commfuseIntArray_t* array) {
  return guarded("commfuseDestroyIntArray", [&] {
    commfuse::api::destroy_handle(int_arrays(), array, "commfuseDestroyIntArray", "array",
                                  "int array", "commfuseCreateIntArray");
  });
}

commfuseStatus_t commfuseAlltoAllQuantMatmulGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2Scale,
    const commfuseTensor_t* commScaleOptional, const commfuseTensor_t* x1OffsetOptional,
    const commfuseTensor_t* x2OffsetOptional, const char* group,
    const commfuseIntArray_t* alltoAllAxesOptional, int64_t x1QuantMode, int64_t x2QuantMode,
    int64_t commQuantMode, int64_t commQuantDtype, int64_t x1QuantDtype, int64_t groupSize,
    int transposeX1, int transposeX2, const commfuseTensor_t* output,
    const commfuseTensor_t* alltoAllOutOptional, uint64_t* workspaceSize,
    commfuseOpExecutor_t** executor) {
  constexpr const char* fn = "commfuseAlltoAllQuantMatmulGetWorkspaceSize";
  return guarded(fn, [&] {
    constexpr const char* op = "alltoall_quant_matmul";
    commfuse::AlltoAllQuantMatmulOptions o;
    commfuse::api::WeightArg x2a;
    TensorView x1v, x2sv, outv, a2av;
    const auto held = commfuse::api::before_plan(op, group, workspaceSize, executor, [&] {
      x1v = tensor_view(x1, fn, "x1");
      x2a = commfuse::api::weight_arg(x2, fn, "x2");
      x2sv = tensor_view(x2Scale, fn, "x2Scale");
      outv = tensor_view(output, fn, "output");
      a2av = tensor_view(alltoAllOutOptional, fn, "alltoAllOutOptional");
      o.bias = optional_tensor_view(biasOptional, fn, "biasOptional");
      o.x1_scale = optional_tensor_view(x1ScaleOptional, fn, "x1ScaleOptional");
      o.comm_scale = optional_tensor_view(commScaleOptional, fn, "commScaleOptional");
      o.x1_offset = optional_tensor_view(x1OffsetOptional, fn, "x1OffsetOptional");
      o.x2_offset = optional_tensor_view(x2OffsetOptional, fn, "x2OffsetOptional");
      o.all_to_all_axes = optional_array(alltoAllAxesOptional, fn, "alltoAllAxesOptional");
    });
    o.x1_quant_mode = x1QuantMode;
    o.x2_quant_mode = x2QuantMode;
    o.comm_quant_mode = commQuantMode;
    o.comm_quant_dtype = commQuantDtype;
    o.x1_quant_dtype = x1QuantDtype;
    o.group_size = groupSize;
    o.transpose_x1 = transposeX1 != 0;
    o.transpose_x2 = transposeX2 != 0;
    o.packed_x2 = x2a.packed.get();
    auto plan = std::make_unique<commfuse::AlltoAllQuantMatmulPlan>(x1v, x2a.view, x2sv, group,
                                                                    outv, a2av, o);
    *executor = commfuse::api::make_executor(op, std::move(plan), workspaceSize, x2a.packed);
  });
}

commfuseStatus_t commfuseAlltoAllQuantMatmul(void* workspace, uint64_t workspaceSize,
                                             commfuseOpExecutor_t* executor, void* stream) {
  constexpr const char* fn = "commfuseAlltoAllQuantMatmul";
  return guarded(fn, [&] {
    commfuse::api::run_executor(fn, "alltoall_quant_matmul", executor, workspace, workspaceSize,
                                stream);
  });
}

commfuseStatus_t commfuseAlltoAllMatmulGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const char* group, const commfuseIntArray_t* alltoAllAxesOptional, int transposeX1,
    int transposeX2, const commfuseTensor_t* output, const commfuseTensor_t* alltoAllOutOptional,
    uint64_t* workspaceSize, commfuseOpExecutor_t** executor) {
  constexpr const char* fn = "commfuseAlltoAllMatmulGetWorkspaceSize";
  return guarded(fn, [&] {
    constexpr const char* op = "alltoall_matmul";
    commfuse::AlltoAllMatmulOptions o;
    commfuse::api::WeightArg x2a;
    TensorView x1v, outv, a2av;
    const auto held = commfuse::api::before_plan(op, group, workspaceSize, executor, [&] {
      x1v = tensor_view(x1, fn, "x1");
      x2a = commfuse::api::weight_arg(x2, fn, "x2");
      outv = tensor_view(output, fn, "output");
      a2av = tensor_view(alltoAllOutOptional, fn, "alltoAllOutOptional");
      o.bias = optional_tensor_view(biasOptional, fn, "biasOptional");
      o.all_to_all_axes = optional_array(alltoAllAxesOptional, fn, "alltoAllAxesOptional");
    });
    o.transpose_x1 = transposeX1 != 0;
    o.transpose_x2 = transposeX2 != 0;
    o.packed_x2 = x2a.packed.get();
    auto plan = std::make_unique<commfuse::AlltoAllMatmulPlan>(x1v, x2a.view, group, outv, a2av, o);
    *executor = commfuse::api::make_executor(op, std::move(plan), workspaceSize, x2a.packed);
  });
}

commfuseStatus_t commfuseAlltoAllMatmul(void* workspace, uint64_t workspaceSize,
                                        commfuseOpExecutor_t* executor, void* stream) {
  constexpr const char* fn = "commfuseAlltoAllMatmul";
  return guarded(fn, [&] {
    commfuse::api::run_executor(fn, "alltoall_matmul", executor, workspace, workspaceSize, stream);
  });
}

}  // extern "C"
