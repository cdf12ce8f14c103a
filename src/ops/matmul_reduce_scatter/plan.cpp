// matmul_reduce_scatter planning: schedule and workspace.
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(MatmulReduceScatterSchedule s) {
  switch (s) {
    case MatmulReduceScatterSchedule::kFused:
      return "fused";
  }
  return "?";
}

MatmulReduceScatterPlanData plan_matmul_reduce_scatter(MatmulReduceProblem problem) {
  MatmulReduceScatterPlanData plan;
  plan.problem = std::move(problem);
  const MatmulReduceProblem& p = plan.problem;
  plan.schedule = MatmulReduceScatterSchedule::kFused;
  plan.workspace_bytes = matmul_reduce_workspace_bytes(p);
  plan.gemm = partial_product_shape(p);
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
