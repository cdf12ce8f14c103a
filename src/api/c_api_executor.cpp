// The C API's executors (aclnn shape): made by each op's XxxGetWorkspaceSize, run and freed
// by its Xxx, or freed unrun by commfuseDestroyOpExecutor.
#include "api/c_api_executor.hpp"

#include <cstdint>
#include <cstring>
#include <memory>

#include "api/c_api_guard.hpp"
#include "core/error.hpp"
#include "ops/common/plan_impl.hpp"

// One planned op (GetWorkspaceSize's output). `op` says which Xxx call may run it.
struct commfuseOpExecutor {
  const char* op = nullptr;
  // What the plan reads and the caller may destroy (a packed weight): declared before the
  // plan, so that it is released after it.
  std::shared_ptr<const void> keep;
  std::unique_ptr<commfuse::Plan> plan;
};

namespace commfuse::api {
namespace {

HandleTable<commfuseOpExecutor>& executors() {
  static auto* const table = new HandleTable<commfuseOpExecutor>;  // a plan may outlive statics
  return *table;
}

// The executor behind handle, out of the table (running it consumes it): freed whatever
// happens next.
std::shared_ptr<commfuseOpExecutor> take_executor(const char* fn,
                                                  const commfuseOpExecutor_t* handle) {
  CF_CHECK_NOTNULL(handle, fn, ": executor is null");
  std::shared_ptr<commfuseOpExecutor> e = executors().take(handle);
  CF_CHECK_ARG(e != nullptr, fn,
               ": executor is not one that GetWorkspaceSize returned, or it was already run or "
               "destroyed (running it consumes it)");
  return e;
}

}  // namespace

commfuseOpExecutor_t* make_executor(const char* op, std::unique_ptr<Plan> plan,
                                    uint64_t* workspace_size, std::shared_ptr<const void> keep) {
  auto e = std::make_shared<commfuseOpExecutor>();
  e->op = op;
  e->keep = std::move(keep);
  const uint64_t bytes = plan->workspace_size();
  e->plan = std::move(plan);
  commfuseOpExecutor_t* handle = executors().add<commfuseOpExecutor_t>(std::move(e));
  *workspace_size = bytes;
  return handle;
}

void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_size, void* stream) {
  const std::shared_ptr<commfuseOpExecutor> e = take_executor(fn, executor);
  // The peers are in this call (or the executor's): they fail it naming this rank, and
  // the communicator stays usable.
  if (std::strcmp(e->op, op) != 0)
    ops::PlanAccess::impl(*e->plan).reject(
        Status::kParamInvalid, detail::cat(fn, ": executor was made for ", e->op, ", not ", op));
  e->plan->execute(workspace, static_cast<size_t>(workspace_size), stream);
}

}  // namespace commfuse::api

extern "C" commfuseStatus_t commfuseDestroyOpExecutor(commfuseOpExecutor_t* executor) {
  constexpr const char* fn = "commfuseDestroyOpExecutor";
  return commfuse::api::guarded(fn, [&] {
    if (executor != nullptr) commfuse::api::take_executor(fn, executor);  // freed here
  });
}
