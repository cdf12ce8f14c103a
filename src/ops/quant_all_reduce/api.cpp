// Public C++ entry points of quant_all_reduce over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/common/call_workspace.hpp"
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse {

QuantAllReducePlan::QuantAllReducePlan(const TensorView& x, const TensorView& scales,
                                       std::string_view group, std::string_view reduce_op,
                                       const TensorView& output)
    : data_(std::make_unique<ops::QuantAllReducePlanData>(
          ops::plan_or_reject(ops::kQuantAllReduceOp, group, [&] {
            return ops::plan_quant_all_reduce_cached(
                ops::validate_quant_all_reduce(x, scales, group, reduce_op, output));
          }))) {
  data_->signature =
      ops::quant_reduce_signature(ops::kQuantAllReduceOp, data_->problem, data_->schedule);
}

QuantAllReducePlan::~QuantAllReducePlan() = default;
QuantAllReducePlan::QuantAllReducePlan(QuantAllReducePlan&&) noexcept = default;
QuantAllReducePlan& QuantAllReducePlan::operator=(QuantAllReducePlan&&) noexcept = default;

size_t QuantAllReducePlan::workspace_size() const {
  return ops::workspace_request(data_->workspace_bytes);
}

const char* QuantAllReducePlan::schedule_name() const {
  return ops::schedule_name(data_->schedule);
}

void QuantAllReducePlan::execute(void* workspace, size_t workspace_bytes) {
  const ops::QuantReduceProblem& p = data_->problem;
  const auto [c, ws] = ops::begin_execute(ops::kQuantAllReduceOp, p.group, p.rank, p.world_size,
                                          workspace, workspace_bytes, data_->workspace_bytes);
  const comm::CallScope call(data_->signature);
  switch (data_->schedule) {
    case ops::QuantAllReduceSchedule::kRsAllGather:
      ops::run_quant_all_reduce_rs_all_gather(*data_, c, ws);
      return;
    case ops::QuantAllReduceSchedule::kUnfused:
      ops::run_quant_all_reduce_unfused(*data_, c, ws);
      return;
    case ops::QuantAllReduceSchedule::kGatherStream:
      ops::run_quant_all_reduce_gather_stream(*data_, c, ws);
      return;
  }
}

void quant_all_reduce(const TensorView& x, const TensorView& scales, std::string_view group,
                      const TensorView& output, std::string_view reduce_op) {
  QuantAllReducePlan plan(x, scales, group, reduce_op, output);
  const ops::CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse
