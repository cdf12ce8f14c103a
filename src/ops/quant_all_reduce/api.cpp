// Public C++ entry points of quant_all_reduce over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/cuda/device_plans.hpp"
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const QuantAllReducePlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::QuantAllReduceSchedule::kRsAllGather:
      ops::run_quant_all_reduce_rs_all_gather(plan, c, ws);
      return;
    case ops::QuantAllReduceSchedule::kUnfused:
      ops::run_quant_all_reduce_unfused(plan, c, ws);
      return;
    case ops::QuantAllReduceSchedule::kScalesFirst:
      ops::run_quant_all_reduce_scales_first(plan, c, ws);
      return;
    case ops::QuantAllReduceSchedule::kGatherStream:
      ops::run_quant_all_reduce_gather_stream(plan, c, ws);
      return;
  }
}

}  // namespace ops

QuantAllReducePlan::QuantAllReducePlan(const TensorView& x, const TensorView& scales,
                                       std::string_view group, std::string_view reduce_op,
                                       const TensorView& output)
    : Plan(ops::plan_or_reject(
          ops::kQuantAllReduceOp, group, [&]() -> std::unique_ptr<ops::PlanImpl> {
            auto problem = ops::validate_quant_all_reduce(x, scales, group, reduce_op, output);
            if (problem.device.type == DeviceType::kCuda)
              return ops::cuda::plan_quant_reduce(ops::kQuantAllReduceOp, std::move(problem), true);
            auto plan = ops::plan_quant_all_reduce_cached(std::move(problem));
            plan.signature =
                ops::quant_reduce_signature(ops::kQuantAllReduceOp, plan.problem, plan.schedule);
            return ops::make_plan(std::move(plan));
          })) {}

void quant_all_reduce(const TensorView& x, const TensorView& scales, std::string_view group,
                      const TensorView& output, std::string_view reduce_op, void* stream) {
  QuantAllReducePlan plan(x, scales, group, reduce_op, output);
  ops::execute_once(plan, stream);
}

}  // namespace commfuse
