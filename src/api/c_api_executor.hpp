// What each op's C entry points need: the tensor descriptors (defined here for all of them)
// and the executor (c_api_executor.cpp), which holds any op's plan as a commfuse::Plan, so
// each op's C file needs no change there. Both are handles (c_api_handles.hpp).
#pragma once

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "api/c_api_handles.hpp"
#include "core/error.hpp"
#include "ops/common/op_context.hpp"

// The C tensor descriptor: a TensorView, and the packed form of the tensor when it is an x2
// with one attached (commfuseSetTensorPackedWeight), kept alive while attached.
struct commfuseTensor {
  commfuse::TensorView view;
  std::shared_ptr<const commfuse::PackedWeight> packed;
};

namespace commfuse::api {

HandleTable<commfuseTensor>& tensors();

// The descriptor behind t (an argument named arg of the call `where`); null for null (an
// optional argument left out); PARAM_INVALID naming arg if t is not a live descriptor.
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

// The C layer's own checks of an XxxGetWorkspaceSize call, before its plan: group not null
// (this rank's alone to report), then the output pointers (cleared) and body (the
// descriptors' look-ups) under plan_or_reject, so that peers already in the call fail it
// naming this rank, as they do for the plan's own rejections.
template <typename F>
void before_plan(const char* op, const char* group, uint64_t* workspace_size,
                 commfuseOpExecutor_t** executor, F&& body) {
  CF_CHECK_NOTNULL(group, op, ": group is null");
  ops::plan_or_reject(op, group, [&] {
    CF_CHECK_NOTNULL(workspace_size, "workspaceSize (output) is null");
    CF_CHECK_NOTNULL(executor, "executor (output) is null");
    *executor = nullptr;
    *workspace_size = 0;
    body();
  });
}

// A new executor for `op` (a string literal) owning the op's plan (commfuse::Plan, the one
// plan type of every operator) and keeping `keep` alive with it (a packed weight the plan
// reads); sets *workspace_size to the plan's.
commfuseOpExecutor_t* make_executor(const char* op, std::unique_ptr<Plan> plan,
                                    uint64_t* workspace_size,
                                    std::shared_ptr<const void> keep = nullptr);

// Takes ownership of executor (it is freed whatever happens), checks that it was made for
// `op` and runs it (a plan over CUDA tensors on `stream`). An executor already run or
// destroyed, or a pointer GetWorkspaceSize never returned, is PARAM_INVALID; one made for
// another op is PARAM_INVALID told to the peers (they fail the call naming this rank).
void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_size, void* stream);

}  // namespace commfuse::api
