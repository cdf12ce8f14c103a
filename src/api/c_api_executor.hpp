// Executors of ops whose C entry points live outside c_api_ops.cpp: the plan is held
// type-erased with the function that runs it, so each op's C file needs no change here.
#pragma once

#include <commfuse/commfuse.h>

#include <cstdint>
#include <memory>

namespace commfuse::api {

using RunPlanFn = void (*)(void* plan, void* workspace, uint64_t workspace_bytes);

// A new executor for `op` (a string literal) owning plan.
commfuseOpExecutor_t* make_executor(const char* op, std::shared_ptr<void> plan, RunPlanFn run);
// Takes ownership of executor (freed whatever happens), checks it was made for op, runs it.
void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_bytes);

}  // namespace commfuse::api
