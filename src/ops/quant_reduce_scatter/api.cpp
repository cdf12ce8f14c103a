// Public C++ entry points of quant_reduce_scatter over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/cuda/device_plans.hpp"
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
    : Plan(ops::plan_or_reject(
          ops::kQuantReduceScatterOp, group, [&]() -> std::unique_ptr<ops::PlanImpl> {
            auto problem = ops::validate_quant_reduce_scatter(x, scales, group, reduce_op, output);
            if (problem.device.type == DeviceType::kCuda)
              return ops::cuda::plan_quant_reduce(ops::kQuantReduceScatterOp, std::move(problem),
                                                  false);
            auto plan = ops::plan_quant_reduce_scatter_cached(std::move(problem));
            plan.signature = ops::quant_reduce_signature(ops::kQuantReduceScatterOp, plan.problem,
                                                         plan.schedule);
            return ops::make_plan(std::move(plan));
          })) {}

void quant_reduce_scatter(const TensorView& x, const TensorView& scales, std::string_view group,
                          const TensorView& output, std::string_view reduce_op, void* stream) {
  QuantReduceScatterPlan plan(x, scales, group, reduce_op, output);
  ops::execute_once(plan, stream);
}

}  // namespace commfuse
