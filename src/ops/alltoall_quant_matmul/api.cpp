// Public C++ entry points of alltoall_quant_matmul over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/cuda/device_plans.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const AlltoAllQuantMatmulPlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::AlltoAllQuantMatmulSchedule::kFused:
      ops::run_alltoall_quant_matmul_fused(plan, c, ws);
      return;
    case ops::AlltoAllQuantMatmulSchedule::kUnfused:
      ops::run_alltoall_quant_matmul_unfused(plan, c, ws);
      return;
  }
}

// The workspace sits in the plan's layout (QuantWorkspace); the schedule's name carries the
// int GEMM's path, the part a benchmark reader asks about.
size_t plan_workspace_bytes(const AlltoAllQuantMatmulPlanData& plan) {
  return plan.ws.total;
}

const char* plan_schedule_name(const AlltoAllQuantMatmulPlanData& plan) {
  const bool unfused = plan.schedule == AlltoAllQuantMatmulSchedule::kUnfused;
  if (plan.small_m)
    return unfused ? "unfused (int GEMM: direct int8, x2 in place)"
                   : "fused (int GEMM: direct int8, x2 in place)";
  switch (plan.path) {
    case kernels::cpu::IntMatmulPath::kS8:
      return unfused ? "unfused (int GEMM: oneDNN s8s8s32)" : "fused (int GEMM: oneDNN s8s8s32)";
    case kernels::cpu::IntMatmulPath::kMadd16:
      return unfused ? "unfused (int GEMM: avx2-madd16)" : "fused (int GEMM: avx2-madd16)";
    case kernels::cpu::IntMatmulPath::kF32Blocked:
      break;
  }
  return unfused ? "unfused (int GEMM: exact f32 blocks)" : "fused (int GEMM: exact f32 blocks)";
}

}  // namespace ops

AlltoAllQuantMatmulPlan::AlltoAllQuantMatmulPlan(const TensorView& x1, const TensorView& x2,
                                                 const TensorView& x2_scale, std::string_view group,
                                                 const TensorView& output,
                                                 const TensorView& all_to_all_out,
                                                 const AlltoAllQuantMatmulOptions& options)
    : Plan(ops::plan_or_reject(
          ops::kAlltoAllQuantMatmulOp, group, [&]() -> std::unique_ptr<ops::PlanImpl> {
            auto problem = ops::validate_alltoall_quant_matmul(x1, x2, x2_scale, group, output,
                                                               all_to_all_out, options);
            if (problem.device.type == DeviceType::kCuda)
              return ops::cuda::plan_alltoall_quant_matmul(std::move(problem), options.stream);
            auto plan = ops::plan_alltoall_quant_matmul_cached(std::move(problem));
            plan.signature = ops::alltoall_quant_matmul_signature(ops::kAlltoAllQuantMatmulOp,
                                                                  plan.problem, plan.schedule);
            return ops::make_plan(std::move(plan));
          })) {}

const char* AlltoAllQuantMatmulPlan::combination_name() const {
  // Checked: a Plan& may have been assigned another op's plan.
  if (const auto* plan =
          dynamic_cast<const ops::OpPlan<ops::AlltoAllQuantMatmulPlanData>*>(&impl()))
    return ops::combo_name(plan->data().problem.combo);
  if (const char* name = ops::cuda::alltoall_quant_combination(impl())) return name;
  detail::throw_status(Status::kParamInvalid,
                       "combination_name: this plan is not an alltoall_quant_matmul plan");
}

void alltoall_quant_matmul(const TensorView& x1, const TensorView& x2, const TensorView& x2_scale,
                           std::string_view group, const TensorView& output,
                           const TensorView& all_to_all_out,
                           const AlltoAllQuantMatmulOptions& options) {
  AlltoAllQuantMatmulPlan plan(x1, x2, x2_scale, group, output, all_to_all_out, options);
  ops::execute_once(plan);
}

}  // namespace commfuse
