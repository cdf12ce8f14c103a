// Public C++ entry points of matmul_all_reduce over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/cuda/device_plans.hpp"
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const MatmulAllReducePlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::MatmulAllReduceSchedule::kFusedRsAllGather:
      ops::run_matmul_all_reduce_rs_all_gather(plan, c, ws);
      return;
    case ops::MatmulAllReduceSchedule::kFused:
      ops::run_matmul_all_reduce_fused(plan, c, ws);
      return;
    case ops::MatmulAllReduceSchedule::kUnfused:
      ops::run_matmul_all_reduce_unfused(plan, c, ws);
      return;
  }
}

}  // namespace ops

MatmulAllReducePlan::MatmulAllReducePlan(const TensorView& x1, const TensorView& x2,
                                         std::string_view group, const TensorView& output,
                                         const MatmulReduceOptions& options)
    : Plan(ops::plan_or_reject(
          ops::kMatmulAllReduceOp, group, [&]() -> std::unique_ptr<ops::PlanImpl> {
            auto problem = ops::validate_matmul_all_reduce(x1, x2, group, output, options);
            if (problem.device.type == DeviceType::kCuda)
              return ops::cuda::plan_matmul_reduce(ops::kMatmulAllReduceOp, std::move(problem),
                                                   true, options.stream);
            auto plan = ops::plan_matmul_all_reduce_cached(std::move(problem));
            plan.signature =
                ops::matmul_signature(ops::kMatmulAllReduceOp, plan.problem, plan.schedule);
            plan.data_field = ops::add_bias_field(plan.problem, plan.signature);
            return ops::make_plan(std::move(plan));
          })) {}

void matmul_all_reduce(const TensorView& x1, const TensorView& x2, std::string_view group,
                       const TensorView& output, const MatmulReduceOptions& options) {
  MatmulAllReducePlan plan(x1, x2, group, output, options);
  ops::execute_once(plan);
}

}  // namespace commfuse
