// Public C++ entry points of all_gather_matmul over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "core/log.hpp"
#include "ops/all_gather_matmul/plan.hpp"
#include "ops/common/call_workspace.hpp"

namespace commfuse {

AllGatherMatmulPlan::AllGatherMatmulPlan(const TensorView& x1, const TensorView& x2,
                                         std::string_view group, int world_size,
                                         const TensorView& output, const TensorView& gather_out,
                                         const AllGatherMatmulOptions& options)
    : data_(std::make_unique<ops::AllGatherMatmulPlanData>(
          ops::plan_or_reject(ops::kAllGatherMatmulOp, group, [&] {
            return ops::plan_all_gather_matmul_cached(ops::validate_all_gather_matmul(
                x1, x2, group, world_size, output, gather_out, options));
          }))) {
  data_->signature =
      ops::matmul_signature(ops::kAllGatherMatmulOp, data_->problem, data_->schedule);
  // Built only when printed: describing costs more than a tiny op itself.
  if (log::verbose_level() >= 1) log::verbose(ops::describe(*data_));
}

AllGatherMatmulPlan::~AllGatherMatmulPlan() = default;
AllGatherMatmulPlan::AllGatherMatmulPlan(AllGatherMatmulPlan&&) noexcept = default;
AllGatherMatmulPlan& AllGatherMatmulPlan::operator=(AllGatherMatmulPlan&&) noexcept = default;

size_t AllGatherMatmulPlan::workspace_size() const {
  return ops::workspace_request(data_->workspace_bytes);
}

std::string AllGatherMatmulPlan::description() const {
  return ops::describe(*data_);
}

const char* AllGatherMatmulPlan::schedule_name() const {
  return ops::schedule_name(data_->schedule);
}

void AllGatherMatmulPlan::execute(void* workspace, size_t workspace_bytes) {
  const ops::AllGatherMatmulProblem& p = data_->problem;
  const auto [c, ws] = ops::begin_execute(ops::kAllGatherMatmulOp, p.group, p.rank, p.world_size,
                                          workspace, workspace_bytes, data_->workspace_bytes);
  const comm::CallScope call(data_->signature);
  switch (data_->schedule) {
    case ops::AllGatherMatmulSchedule::kFused:
      ops::run_all_gather_matmul_fused(*data_, c, ws);
      return;
    case ops::AllGatherMatmulSchedule::kUnfused:
      ops::run_all_gather_matmul_unfused(*data_, c, ws);
      return;
  }
}

void all_gather_matmul(const TensorView& x1, const TensorView& x2, std::string_view group,
                       int world_size, const TensorView& output, const TensorView& gather_out,
                       const AllGatherMatmulOptions& options) {
  AllGatherMatmulPlan plan(x1, x2, group, world_size, output, gather_out, options);
  const ops::CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse
