// What each op's C entry points need: the tensor descriptors (c_api_tensor.hpp) and the
// executor (c_api_executor.cpp), which holds any op's plan as a commfuse::Plan, so each op's
// C file needs no change there. Both are handles (c_api_handles.hpp).
#pragma once

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "api/c_api_handles.hpp"
#include "api/c_api_tensor.hpp"
#include "api/held_comms.hpp"
#include "core/error.hpp"
#include "ops/common/op_context.hpp"

namespace commfuse::api {

// The C-made communicator `group` names, kept alive while the result is (held_comms.hpp);
// null for a group the C API did not make. PARAM_INVALID "<op>: group '<name>' was destroyed
// (commfuseCommDestroy)" once destroyed.
inline std::shared_ptr<Comm> hold_c_group(const char* op, std::string_view group) {
  HeldLookup h = find_held_comm(group);
  CF_CHECK_ARG(!h.destroyed, op, ": group '", group, "' was destroyed (commfuseCommDestroy)");
  return std::move(h.comm);
}

// The C layer's own checks of an XxxGetWorkspaceSize call, before its plan: group not null
// (this rank's alone to report), then the output pointers (cleared) and body (the
// descriptors' look-ups) under plan_or_reject, so that peers already in the call fail it
// naming this rank, as they do for the plan's own rejections.
// Returns the group's communicator where the C API made it (else null), for the caller to
// hold until its GetWorkspaceSize returns: its plan, rejections and make_executor reach the
// communicator by name, and a destroy from another thread must not free it meanwhile.
template <typename F>
[[nodiscard]] std::shared_ptr<Comm> before_plan(const char* op, const char* group,
                                                uint64_t* workspace_size,
                                                commfuseOpExecutor_t** executor, F&& body) {
  // The outputs cleared first, whatever fails (a caller may test the executor for null).
  if (executor != nullptr) *executor = nullptr;
  if (workspace_size != nullptr) *workspace_size = 0;
  CF_CHECK_NOTNULL(group, op, ": group is null");
  const std::shared_ptr<Comm> held = hold_c_group(op, group);
  ops::plan_or_reject(op, group, [&] {
    CF_CHECK_NOTNULL(workspace_size, "workspaceSize (output) is null");
    CF_CHECK_NOTNULL(executor, "executor (output) is null");
    *executor = nullptr;
    *workspace_size = 0;
    body();
  });
  return held;
}

// A new executor for `op` (a string literal) owning the op's plan (commfuse::Plan, the one
// plan type of every operator) and keeping `keep` alive with it (a packed weight the plan
// reads); sets *workspace_size to the plan's.
commfuseOpExecutor_t* make_executor(const char* op, std::unique_ptr<Plan> plan,
                                    uint64_t* workspace_size,
                                    std::shared_ptr<const void> keep = nullptr);

// Takes ownership of executor (it is freed whatever happens), checks that it was made for
// `op` and runs it (a plan over CUDA tensors on `stream`). An executor already run or
// destroyed (of the last 4096), or one made for another op, is PARAM_INVALID told to the
// peers (they fail the call naming this rank); a pointer GetWorkspaceSize never returned is
// PARAM_INVALID on this rank alone (no group to tell), as is a group destroyed since (through
// the C API; one the C API made is held for the call).
void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_size, void* stream);

}  // namespace commfuse::api
