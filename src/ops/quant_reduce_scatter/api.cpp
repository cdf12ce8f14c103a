// Public C++ entry points of quant_reduce_scatter over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/common/call_workspace.hpp"
#include "ops/quant_reduce_scatter/plan.hpp"

namespace commfuse {

QuantReduceScatterPlan::QuantReduceScatterPlan(const TensorView& x, const TensorView& scales,
                                               std::string_view group, std::string_view reduce_op,
                                               const TensorView& output)
    : data_(std::make_unique<ops::QuantReduceScatterPlanData>(
          ops::plan_or_reject(ops::kQuantReduceScatterOp, group, [&] {
            return ops::plan_quant_reduce_scatter_cached(
                ops::validate_quant_reduce_scatter(x, scales, group, reduce_op, output));
          }))) {
  data_->signature =
      ops::quant_reduce_signature(ops::kQuantReduceScatterOp, data_->problem, data_->schedule);
}

QuantReduceScatterPlan::~QuantReduceScatterPlan() = default;
QuantReduceScatterPlan::QuantReduceScatterPlan(QuantReduceScatterPlan&&) noexcept = default;
QuantReduceScatterPlan& QuantReduceScatterPlan::operator=(QuantReduceScatterPlan&&) noexcept =
    default;

size_t QuantReduceScatterPlan::workspace_size() const {
  return ops::workspace_request(data_->workspace_bytes);
}

const char* QuantReduceScatterPlan::schedule_name() const {
  return ops::schedule_name(data_->schedule);
}

void QuantReduceScatterPlan::execute(void* workspace, size_t workspace_bytes) {
  const ops::QuantReduceProblem& p = data_->problem;
  const auto [c, ws] = ops::begin_execute(ops::kQuantReduceScatterOp, p.group, p.rank, p.world_size,
                                          workspace, workspace_bytes, data_->workspace_bytes);
  const comm::CallScope call(data_->signature);
  switch (data_->schedule) {
    case ops::QuantReduceScatterSchedule::kAllToAllStream:
      ops::run_quant_reduce_scatter_all_to_all_stream(*data_, c, ws);
      return;
    case ops::QuantReduceScatterSchedule::kUnfused:
      ops::run_quant_reduce_scatter_unfused(*data_, c, ws);
      return;
  }
}

void quant_reduce_scatter(const TensorView& x, const TensorView& scales, std::string_view group,
                          const TensorView& output, std::string_view reduce_op) {
  QuantReduceScatterPlan plan(x, scales, group, reduce_op, output);
  const ops::CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse
