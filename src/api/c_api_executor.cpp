// The C API's executors (aclnn shape): made by each op's XxxGetWorkspaceSize, run and freed
// by its Xxx, or freed unrun by commfuseDestroyOpExecutor.
#include "api/c_api_executor.hpp"

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

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

// Executors already run or destroyed, by handle, with whose call each was: running one again
// (a retry after an error, a loop that reuses it) is PARAM_INVALID told to the peers, which
// are in that call and would otherwise wait out their timeout. Bounded, oldest forgotten
// first (an older one fails on this rank only, as a pointer never returned does).
class SpentExecutors {
 public:
  void add(const void* handle, ops::CallOwner owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (order_.size() == kRemembered) {
      owners_.erase(order_.front());
      order_.pop_front();
    }
    const auto id = reinterpret_cast<uintptr_t>(handle);
    order_.push_back(id);
    owners_.insert_or_assign(id, std::move(owner));
  }
  std::optional<ops::CallOwner> find(const void* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = owners_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == owners_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static constexpr size_t kRemembered = 4096;
  mutable std::mutex mutex_;
  std::unordered_map<uintptr_t, ops::CallOwner> owners_;
  std::deque<uintptr_t> order_;
};

SpentExecutors& spent() {
  static auto* const spent = new SpentExecutors;
  return *spent;
}

// The executor behind handle, out of the table (running or destroying it consumes it): freed
// whatever happens next. in_call: for Xxx, whose peers are in the call (a spent executor's
// error is told to them); commfuseDestroyOpExecutor is no call.
std::shared_ptr<commfuseOpExecutor> take_executor(const char* fn,
                                                  const commfuseOpExecutor_t* handle,
                                                  bool in_call) {
  CF_CHECK_NOTNULL(handle, fn, ": executor is null");
  std::shared_ptr<commfuseOpExecutor> e = executors().take(handle);
  if (e != nullptr) {
    spent().add(handle, ops::PlanAccess::impl(*e->plan).owner());
    return e;
  }
  if (in_call) {
    if (const std::optional<ops::CallOwner> owner = spent().find(handle)) {
      // Telling the peers reaches the communicator by name: held meanwhile (held_comms.hpp).
      const std::shared_ptr<Comm> held = hold_c_group(owner->op, owner->group);
      owner->reject(Status::kParamInvalid,
                    detail::cat(fn,
                                ": executor was already run or destroyed (running it "
                                "consumes it; make another with GetWorkspaceSize)"));
    }
  }
  detail::throw_status(Status::kParamInvalid,
                       detail::cat(fn,
                                   ": executor is not one that GetWorkspaceSize returned, or it "
                                   "was already run or destroyed (running it consumes it)"));
}

}  // namespace

commfuseOpExecutor_t* make_executor(const char* op, std::unique_ptr<Plan> plan,
                                    uint64_t* workspace_size, std::shared_ptr<const void> keep) {
  // Held outside the try, so that the plan outlives a failed add and can fail the call on
  // the peers (which are in it: GetWorkspaceSize is part of the call).
  std::shared_ptr<commfuseOpExecutor> e;
  try {
    e = std::make_shared<commfuseOpExecutor>();
    e->op = op;
    e->keep = std::move(keep);
    e->plan = std::move(plan);
    commfuseOpExecutor_t* handle = executors().add<commfuseOpExecutor_t>(e);
    *workspace_size = e->plan->workspace_size();
    return handle;
  } catch (const std::bad_alloc&) {
    const Plan& planned = e != nullptr && e->plan != nullptr ? *e->plan : *plan;
    ops::PlanAccess::impl(planned).reject(Status::kRuntimeError,
                                          "out of memory making the executor");
  }
}

void run_executor(const char* fn, const char* op, commfuseOpExecutor_t* executor, void* workspace,
                  uint64_t workspace_size, void* stream) {
  const std::shared_ptr<commfuseOpExecutor> e = take_executor(fn, executor, true);
  const std::shared_ptr<Comm> held =
      hold_c_group(op, ops::PlanAccess::impl(*e->plan).owner().group);
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
    if (executor != nullptr) commfuse::api::take_executor(fn, executor, false);  // freed here
  });
}
