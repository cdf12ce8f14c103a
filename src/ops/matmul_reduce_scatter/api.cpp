// Public C++ entry points of matmul_reduce_scatter over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/cuda/device_plans.hpp"
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const MatmulReduceScatterPlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::MatmulReduceScatterSchedule::kFused:
      ops::run_matmul_reduce_scatter_fused(plan, c, ws);
      return;
    case ops::MatmulReduceScatterSchedule::kUnfused:
      ops::run_matmul_reduce_scatter_unfused(plan, c, ws);
      return;
  }
}

}  // namespace ops

MatmulReduceScatterPlan::MatmulReduceScatterPlan(const TensorView& x1, const TensorView& x2,
                                                 std::string_view group, int world_size,
                                                 const TensorView& output,
                                                 const MatmulReduceOptions& options)
    : Plan(ops::plan_or_reject(
          ops::kMatmulReduceScatterOp, group, [&]() -> std::unique_ptr<ops::PlanImpl> {
            auto problem =
                ops::validate_matmul_reduce_scatter(x1, x2, group, world_size, output, options);
            if (problem.device.type == DeviceType::kCuda)
              return ops::cuda::plan_matmul_reduce(ops::kMatmulReduceScatterOp, std::move(problem),
                                                   false, options.stream);
            auto plan = ops::plan_matmul_reduce_scatter_cached(std::move(problem));
            plan.signature =
                ops::matmul_signature(ops::kMatmulReduceScatterOp, plan.problem, plan.schedule);
            plan.data_field = ops::add_bias_field(plan.problem, plan.signature);
            return ops::make_plan(std::move(plan));
          })) {}

void matmul_reduce_scatter(const TensorView& x1, const TensorView& x2, std::string_view group,
                           int world_size, const TensorView& output,
                           const MatmulReduceOptions& options) {
  MatmulReduceScatterPlan plan(x1, x2, group, world_size, output, options);
  ops::execute_once(plan);
}

}  // namespace commfuse
