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

TensorView view_of(const commfuseTensor_t* t) {
  return t != nullptr ? t->view : TensorView{};
}

std::optional<TensorView> optional_view(const commfuseTensor_t* t) {
  if (t == nullptr) return std::nullopt;
  return t->view;
}

std::optional<std::vector<int64_t>> optional_array(const commfuseIntArray_t* a) {
  if (a == nullptr) return std::nullopt;
  return a->values;
}

void check_outputs(const char* fn, uint64_t* workspace_size, commfuseOpExecutor_t** executor) {
  CF_CHECK_NOTNULL(workspace_size, fn, ": workspaceSize (output) is null");
  CF_CHECK_NOTNULL(executor, fn, ": executor (output) is null");
  *executor = nullptr;
  *workspace_size = 0;
}

}  // namespace

extern "C" {

commfuseIntArray_t* commfuseCreateIntArray(const int64_t* value, uint64_t size) {
  commfuseIntArray_t* out = nullptr;
  guarded("commfuseCreateIntArray", [&] {
    CF_CHECK_ARG(size <= 64, "commfuseCreateIntArray: size is ", size, " (at most 64)");
    if (size > 0)
      CF_CHECK_NOTNULL(value, "commfuseCreateIntArray: value is null (size ", size, ")");
    auto a = std::make_unique<commfuseIntArray>();
    if (size > 0) a->values.assign(value, value + size);
    out = a.release();
  });
  return out;
}

commfuseStatus_t commfuseDestroyIntArray(const commfuseIntArray_t* array) {
  return guarded("commfuseDestroyIntArray", [&] { delete array; });
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
    check_outputs(fn, workspaceSize, executor);
    CF_CHECK_NOTNULL(group, "alltoall_quant_matmul: group is null");
    commfuse::AlltoAllQuantMatmulOptions o;
    o.bias = optional_view(biasOptional);
    o.x1_scale = optional_view(x1ScaleOptional);
    o.comm_scale = optional_view(commScaleOptional);
    o.x1_offset = optional_view(x1OffsetOptional);
    o.x2_offset = optional_view(x2OffsetOptional);
    o.all_to_all_axes = optional_array(alltoAllAxesOptional);
    o.x1_quant_mode = x1QuantMode;
    o.x2_quant_mode = x2QuantMode;
    o.comm_quant_mode = commQuantMode;
    o.comm_quant_dtype = commQuantDtype;
    o.x1_quant_dtype = x1QuantDtype;
    o.group_size = groupSize;
    o.transpose_x1 = transposeX1 != 0;
    o.transpose_x2 = transposeX2 != 0;
    o.packed_x2 = x2 != nullptr ? x2->packed : nullptr;
    auto plan = std::make_unique<commfuse::AlltoAllQuantMatmulPlan>(
        view_of(x1), view_of(x2), view_of(x2Scale), group, view_of(output),
        view_of(alltoAllOutOptional), o);
    *executor =
        commfuse::api::make_executor("alltoall_quant_matmul", std::move(plan), workspaceSize);
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
    check_outputs(fn, workspaceSize, executor);
    CF_CHECK_NOTNULL(group, "alltoall_matmul: group is null");
    commfuse::AlltoAllMatmulOptions o;
    o.bias = optional_view(biasOptional);
    o.all_to_all_axes = optional_array(alltoAllAxesOptional);
    o.transpose_x1 = transposeX1 != 0;
    o.transpose_x2 = transposeX2 != 0;
    o.packed_x2 = x2 != nullptr ? x2->packed : nullptr;
    auto plan = std::make_unique<commfuse::AlltoAllMatmulPlan>(
        view_of(x1), view_of(x2), group, view_of(output), view_of(alltoAllOutOptional), o);
    *executor = commfuse::api::make_executor("alltoall_matmul", std::move(plan), workspaceSize);
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
