// matmul_reduce_scatter planning: schedule and workspace.
#include "ops/matmul_reduce_scatter/plan.hpp"

#include <vector>

#include "ops/common/algorithm.hpp"

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
  const std::vector<AlgorithmEntry> list{{"fused", ""}, {"unfused", ""}};
  plan.schedule = static_cast<MatmulReduceScatterSchedule>(choose_algorithm(
      kMatmulReduceScatterOp,
      detail::cat(kMatmulReduceScatterOp, "(rank ", p.rank, ") m=", p.m, " R=", p.world_size,
                  " k=", p.k, " n=", p.n, " ", dtype_name(p.dtype)),
      list));
  plan.workspace_bytes = matmul_reduce_workspace_bytes(p);
  if (plan.schedule == MatmulReduceScatterSchedule::kUnfused)  // + the collective's fp32 result
    plan.workspace_bytes += static_cast<size_t>(p.m / p.world_size * p.n) * sizeof(float);
  plan.gemm = partial_product_shape(p);
  plan_row_gemm(plan.gemm);
  return plan;
}

std::string describe(const MatmulReduceScatterPlanData& plan) {
  const MatmulReduceProblem& p = plan.problem;
  return detail::cat(kMatmulReduceScatterOp, "(rank ", p.rank, "): m=", p.m, " k=", p.k, " n=", p.n,
                     " ", dtype_name(p.dtype), " R=", p.world_size, ", schedule ",
                     schedule_name(plan.schedule), ", workspace ", plan.workspace_bytes,
                     " bytes; gemm: ", describe_row_gemm(plan.gemm, p.m));
}

}  // namespace commfuse::ops
