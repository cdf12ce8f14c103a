// The C API's executors (aclnn shape): made by each op's XxxGetWorkspaceSize, run and freed
// by its Xxx, or freed unrun by commfuseDestroyOpExecutor.
#include "api/c_api_executor.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "api/c_api_guard.hpp"
#include "core/error.hpp"

// One planned op (GetWorkspaceSize's output). `op` says which Xxx call may run it.
struct commfuseOpExecutor {
  const char* op = nullptr;
  std::unique_ptr<commfuse::Plan> plan;
};

namespace {

// The live executors. A handle is a number, never an address, and never handed out twice:
// an executor already run (running consumes it) or destroyed is not found, so running or
// destroying it again is PARAM_INVALID rather than a use of freed memory, and no later
// executor answers to a stale handle, as one allocated at a reused address would.
class ExecutorTable {
 public:
  commfuseOpExecutor_t* add(std::unique_ptr<commfuseOpExecutor> e) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t id = ++last_;
    live_.emplace(id, std::move(e));
    return reinterpret_cast<commfuseOpExecutor_t*>(static_cast<uintptr_t>(id));
  }
  // The executor behind handle, now the caller's; null if it is not live.
  std::unique_ptr<commfuseOpExecutor> take(const commfuseOpExecutor_t* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == live_.end()) return nullptr;
    std::unique_ptr<commfuseOpExecutor> e = std::move(it->second);
    live_.erase(it);
    return e;
  }

 private:
  std::mutex mutex_;
  uint64_t last_ = 0;
  std::unordered_map<uint64_t, std::unique_ptr<commfuseOpExecutor>> live_;
};

ExecutorTable& executors() {
  static auto* const table = new ExecutorTable;  // never destroyed: a plan may outlive statics
  return *table;
}

// The executor behind handle, out of the table: freed whatever happens next.
std::unique_ptr<commfuseOpExecutor> take_executor(const char* fn,
                                                  const commfuseOpExecutor_t* handle) {
  CF_CHECK_NOTNULL(handle, fn, ": executor is null");
  std::unique_ptr<commfuseOpExecutor> e = executors().take(handle);
  CF_CHECK_ARG(e != nullptr, fn,
               ": executor is not one that GetWorkspaceSize returned, or it was already run or "
               "destroyed (running it consumes it)");
  return e;
}

}  // namespace

extern "C" commfuseStatus_t commfuseDestroyOpExecutor(commfuseOpExecutor_t* executor) {
  constexpr const char* fn = "commfuseDestroyOpExecutor";
  return commfuse::api::guarded(fn, [&] {
    if (executor != nullptr) take_executor(fn, executor);  // freed here
  });
}

namespace commfuse::api {

commfuseOpExecutor_t* make_executor(const char* op, std::unique_ptr<Plan> plan,
                                    uint64_t* workspace_size) {
  auto e = std::make_unique<commfuseOpExecutor>();
  e->op = op;
  *workspace_size = plan->workspace_size();
  e->plan = std::move(plan);
  return executors().add(std::move(e));
}

void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_size, void* stream) {
  const std::unique_ptr<commfuseOpExecutor> e = take_executor(fn, executor);
  CF_CHECK_ARG(std::strcmp(e->op, op) == 0, fn, ": executor was made for ", e->op, ", not ", op);
  e->plan->execute(workspace, static_cast<size_t>(workspace_size), stream);
}

}  // namespace commfuse::api
