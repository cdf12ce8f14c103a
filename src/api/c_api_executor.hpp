// What each op's C entry points need: the tensor descriptor (defined here for all of them,
// read through c_api_ops.cpp) and the executor (c_api_executor.cpp), which holds any op's plan
// as a commfuse::Plan, so each op's C file needs no change there.
#pragma once

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

// The C tensor descriptor: a TensorView, and the packed form of the tensor when it is an x2
// with one attached (commfuseSetTensorPackedWeight).
struct commfuseTensor {
  commfuse::TensorView view;
  const commfuse::PackedWeight* packed = nullptr;
};

namespace commfuse::api {

// The view a descriptor holds; absent (ndim 0) for null.
TensorView tensor_view(const commfuseTensor_t* t);
// A new executor for `op` (a string literal) owning the op's plan (commfuse::Plan, the one
// plan type of every operator); sets *workspace_size to the plan's.
commfuseOpExecutor_t* make_executor(const char* op, std::unique_ptr<Plan> plan,
                                    uint64_t* workspace_size);

// Takes ownership of executor (it is freed whatever happens), checks that it was made for
// `op` and runs it (a plan over CUDA tensors on `stream`). An executor already run or
// destroyed, or a pointer GetWorkspaceSize never returned, is PARAM_INVALID.
void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_size, void* stream);

}  // namespace commfuse::api
