// Public C++ entry points of quant_reduce_scatter over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/quant_reduce_scatter/plan.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const QuantReduceScatterPlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::QuantReduceScatterSchedule::kAllToAllStream:
      ops::run_quant_reduce_scatter_all_to_all_stream(plan, c, ws);
      return;
    case ops::QuantReduceScatterSchedule::kUnfused:
      ops::run_quant_reduce_scatter_unfused(plan, c, ws);
      return;
  }
}

}  // namespace ops

QuantReduceScatterPlan::QuantReduceScatterPlan(const TensorView& x, const TensorView& scales,
                                               std::string_view group, std::string_view reduce_op,
                                               const TensorView& output)
    : Plan(ops::make_plan(ops::plan_or_reject(ops::kQuantReduceScatterOp, group, [&] {
        auto plan = ops::plan_quant_reduce_scatter_cached(
            ops::validate_quant_reduce_scatter(x, scales, group, reduce_op, output));
        plan.signature =
            ops::quant_reduce_signature(ops::kQuantReduceScatterOp, plan.problem, plan.schedule);
        return plan;
      }))) {}

void quant_reduce_scatter(const TensorView& x, const TensorView& scales, std::string_view group,
                          const TensorView& output, std::string_view reduce_op) {
  QuantReduceScatterPlan plan(x, scales, group, reduce_op, output);
  ops::execute_once(plan);
}

}  // namespace commfuse
