// Public C++ entry points of matmul_reduce_scatter over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "core/log.hpp"
#include "ops/common/call_workspace.hpp"
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse {

MatmulReduceScatterPlan::MatmulReduceScatterPlan(const TensorView& x1, const TensorView& x2,
                                                 std::string_view group, int world_size,
                                                 const TensorView& output,
                                                 const MatmulReduceOptions& options)
    : data_(std::make_unique<ops::MatmulReduceScatterPlanData>(
          ops::plan_or_reject(ops::kMatmulReduceScatterOp, group, [&] {
            return ops::plan_matmul_reduce_scatter_cached(
                ops::validate_matmul_reduce_scatter(x1, x2, group, world_size, output, options));
          }))) {
  data_->signature =
      ops::matmul_signature(ops::kMatmulReduceScatterOp, data_->problem, data_->schedule);
  // Built only when printed: describing costs more than a tiny op itself.
  if (log::verbose_level() >= 1) log::verbose(ops::describe(*data_));
}

MatmulReduceScatterPlan::~MatmulReduceScatterPlan() = default;
MatmulReduceScatterPlan::MatmulReduceScatterPlan(MatmulReduceScatterPlan&&) noexcept = default;
MatmulReduceScatterPlan& MatmulReduceScatterPlan::operator=(MatmulReduceScatterPlan&&) noexcept =
    default;

size_t MatmulReduceScatterPlan::workspace_size() const {
  return ops::workspace_request(data_->workspace_bytes);
}

std::string MatmulReduceScatterPlan::description() const {
  return ops::describe(*data_);
}

const char* MatmulReduceScatterPlan::schedule_name() const {
  return ops::schedule_name(data_->schedule);
}

void MatmulReduceScatterPlan::execute(void* workspace, size_t workspace_bytes) {
  const ops::MatmulReduceProblem& p = data_->problem;
  const auto [c, ws] =
      ops::begin_execute(ops::kMatmulReduceScatterOp, p.group, p.rank, p.world_size, workspace,
                         workspace_bytes, data_->workspace_bytes);
  const comm::CallScope call(data_->signature);
  switch (data_->schedule) {
    case ops::MatmulReduceScatterSchedule::kFused:
      ops::run_matmul_reduce_scatter_fused(*data_, c, ws);
      return;
    case ops::MatmulReduceScatterSchedule::kUnfused:
      ops::run_matmul_reduce_scatter_unfused(*data_, c, ws);
      return;
  }
}

void matmul_reduce_scatter(const TensorView& x1, const TensorView& x2, std::string_view group,
                           int world_size, const TensorView& output,
                           const MatmulReduceOptions& options) {
  MatmulReduceScatterPlan plan(x1, x2, group, world_size, output, options);
  const ops::CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse
