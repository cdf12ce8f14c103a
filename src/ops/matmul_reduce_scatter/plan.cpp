// matmul_reduce_scatter planning: schedule and workspace.
#include "ops/matmul_reduce_scatter/plan.hpp"

#include <vector>

#include "core/algorithm.hpp"

namespace commfuse::ops {

const char* schedule_name(MatmulReduceScatterSchedule s) {
  switch (s) {
    case MatmulReduceScatterSchedule::kFused:
      return "fused";
    case MatmulReduceScatterSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

MatmulReduceScatterPlanData plan_matmul_reduce_scatter(MatmulReduceProblem problem) {
  MatmulReduceScatterPlanData plan;
  plan.problem = std::move(problem);
  const MatmulReduceProblem& p = plan.problem;
  const std::vector<AlgorithmEntry> list{
      {"fused", "",
       small_partial_reason(p, kReduceScatterFusedMinPartialBytes, UnfusedSends::kBlock)},
      {"unfused", ""}};
  plan.schedule = static_cast<MatmulReduceScatterSchedule>(choose_algorithm(
      kMatmulReduceScatterOp, [&] { return describe_problem(kMatmulReduceScatterOp, p); }, list));
  plan.workspace_bytes = matmul_reduce_workspace_bytes(p);
  if (plan.schedule == MatmulReduceScatterSchedule::kUnfused)  // + the collective's fp32 result
    plan.workspace_bytes += static_cast<size_t>(p.m / p.world_size * p.n) * sizeof(float);
  plan.gemm = partial_product_shape(p);
  return plan;
}

MatmulReduceScatterPlanData plan_matmul_reduce_scatter_cached(MatmulReduceProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<MatmulReduceScatterPlanData>(kMatmulReduceScatterOp);
  return cache->get(
      plan_key(kMatmulReduceScatterOp, problem),
      [&] { return plan_matmul_reduce_scatter(problem); },
      [&](MatmulReduceScatterPlanData& plan) {
        plan.problem = std::move(problem);
        bind_pointers(plan.gemm, plan.problem);
      });
}

std::string describe(const MatmulReduceScatterPlanData& plan) {
  return describe_matmul_reduce_plan(kMatmulReduceScatterOp, plan.problem,
                                     schedule_name(plan.schedule), plan.workspace_bytes, plan.gemm);
}

}  // namespace commfuse::ops
