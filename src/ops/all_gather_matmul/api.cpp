// Public C++ entry points of all_gather_matmul over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/all_gather_matmul/plan.hpp"
#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/cuda/device_plans.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const AllGatherMatmulPlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::AllGatherMatmulSchedule::kFused:
      ops::run_all_gather_matmul_fused(plan, c, ws);
      return;
    case ops::AllGatherMatmulSchedule::kUnfused:
      ops::run_all_gather_matmul_unfused(plan, c, ws);
      return;
  }
}

}  // namespace ops

AllGatherMatmulPlan::AllGatherMatmulPlan(const TensorView& x1, const TensorView& x2,
                                         std::string_view group, int world_size,
                                         const TensorView& output, const TensorView& gather_out,
                                         const AllGatherMatmulOptions& options)
    : Plan(ops::plan_or_reject(
          ops::kAllGatherMatmulOp, group, [&]() -> std::unique_ptr<ops::PlanImpl> {
            auto problem = ops::validate_all_gather_matmul(x1, x2, group, world_size, output,
                                                           gather_out, options);
            if (problem.device.type == DeviceType::kCuda)
              return ops::cuda::plan_all_gather_matmul(std::move(problem), options.stream);
            auto plan = ops::plan_all_gather_matmul_cached(std::move(problem));
            plan.signature =
                ops::matmul_signature(ops::kAllGatherMatmulOp, plan.problem, plan.schedule);
            // The algorithm list reads it on shm (plan.cpp), so every rank must pass it alike.
            plan.signature.add("gather_output", plan.problem.gather_out != nullptr ? 1 : 0);
            return ops::make_plan(std::move(plan));
          })) {}

void all_gather_matmul(const TensorView& x1, const TensorView& x2, std::string_view group,
                       int world_size, const TensorView& output, const TensorView& gather_out,
                       const AllGatherMatmulOptions& options) {
  AllGatherMatmulPlan plan(x1, x2, group, world_size, output, gather_out, options);
  ops::execute_once(plan);
}

}  // namespace commfuse
