// commfuse::Plan, the one plan type of every operator (ops/common/plan_impl.hpp).
#include <commfuse/commfuse.hpp>

#include <utility>

#include "core/error.hpp"
#include "ops/common/plan_impl.hpp"

namespace commfuse {

Plan::Plan(std::unique_ptr<ops::PlanImpl> impl) : impl_(std::move(impl)) {}
Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

const ops::PlanImpl& Plan::impl() const {
  // A moved-from plan is empty: say so rather than crash.
  if (!impl_)
    detail::throw_status(Status::kParamInvalid, "plan: this plan was moved from (it is empty)");
  return *impl_;
}

size_t Plan::workspace_size() const {
  return impl().workspace_size();
}

const char* Plan::schedule_name() const {
  return impl().schedule_name();
}

std::string Plan::description() const {
  return impl().description();
}

void Plan::execute(void* workspace, size_t workspace_bytes) {
  impl().execute(workspace, workspace_bytes, nullptr);
}

void Plan::execute(void* workspace, size_t workspace_bytes, void* stream) {
  impl().execute(workspace, workspace_bytes, stream);
}

}  // namespace commfuse
