// What an op's C entry points in their own file need from c_api_ops.cpp, which owns the
// tensor descriptor and the executor types: the plan is held type-erased with the function
// that runs it, so each op's C file needs no change there.
#pragma once

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace commfuse::api {

// The view a descriptor holds; absent (ndim 0) for null.
TensorView tensor_view(const commfuseTensor_t* t);
// A new executor for `op` (a string literal) whose execution is run(workspace, workspaceSize).
commfuseOpExecutor_t* make_executor(const char* op, std::function<void(void*, size_t)> run);

using RunPlanFn = void (*)(void* plan, void* workspace, uint64_t workspace_bytes);
// The same, owning plan and running it with run.
inline commfuseOpExecutor_t* make_executor(const char* op, std::shared_ptr<void> plan,
                                           RunPlanFn run) {
  return make_executor(op, [plan = std::move(plan), run](void* w, size_t bytes) {
    run(plan.get(), w, static_cast<uint64_t>(bytes));
  });
}

// Takes ownership of executor (it is freed whatever happens), checks that it was made for
// `op` and runs it.
void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_size);

}  // namespace commfuse::api
