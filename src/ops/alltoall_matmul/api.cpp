// Public C++ entry points of alltoall_matmul over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/alltoall_matmul/plan.hpp"
#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/cuda/device_plans.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const AlltoAllMatmulPlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::AlltoAllMatmulSchedule::kFused:
      ops::run_alltoall_matmul_fused(plan, c, ws);
      return;
    case ops::AlltoAllMatmulSchedule::kUnfused:
      ops::run_alltoall_matmul_unfused(plan, c, ws);
      return;
  }
}

}  // namespace ops

AlltoAllMatmulPlan::AlltoAllMatmulPlan(const TensorView& x1, const TensorView& x2,
                                       std::string_view group, const TensorView& output,
                                       const TensorView& all_to_all_out,
                                       const AlltoAllMatmulOptions& options)
    : Plan(ops::plan_or_reject(
          ops::kAlltoAllMatmulOp, group, [&]() -> std::unique_ptr<ops::PlanImpl> {
            auto problem =
                ops::validate_alltoall_matmul(x1, x2, group, output, all_to_all_out, options);
            if (problem.device.type == DeviceType::kCuda)
              return ops::cuda::plan_alltoall_matmul(std::move(problem), options.stream);
            auto plan = ops::plan_alltoall_matmul_cached(std::move(problem));
            plan.signature =
                ops::alltoall_matmul_signature(ops::kAlltoAllMatmulOp, plan.problem, plan.schedule);
            return ops::make_plan(std::move(plan));
          })) {}

void alltoall_matmul(const TensorView& x1, const TensorView& x2, std::string_view group,
                     const TensorView& output, const TensorView& all_to_all_out,
                     const AlltoAllMatmulOptions& options) {
  AlltoAllMatmulPlan plan(x1, x2, group, output, all_to_all_out, options);
  ops::execute_once(plan);
}

}  // namespace commfuse
