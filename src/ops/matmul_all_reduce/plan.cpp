// matmul_all_reduce planning: schedule and workspace.
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(MatmulAllReduceSchedule s) {
  switch (s) {
    case MatmulAllReduceSchedule::kFused:
      return "fused";
  }
  return "?";
}

MatmulAllReducePlanData plan_matmul_all_reduce(MatmulReduceProblem problem) {
  MatmulAllReducePlanData plan;
  plan.problem = std::move(problem);
  const MatmulReduceProblem& p = plan.problem;
  plan.schedule = MatmulAllReduceSchedule::kFused;
  plan.workspace_bytes = matmul_reduce_workspace_bytes(p);
  plan.gemm = partial_product_shape(p);
  return plan;
}

std::string describe(const MatmulAllReducePlanData& plan) {
  const MatmulReduceProblem& p = plan.problem;
  return detail::cat(kMatmulAllReduceOp, "(rank ", p.rank, "): m=", p.m, " k=", p.k, " n=", p.n,
                     " ", dtype_name(p.dtype), " R=", p.world_size, ", schedule ",
                     schedule_name(plan.schedule), ", workspace ", plan.workspace_bytes,
                     " bytes; gemm: ", describe_row_gemm(plan.gemm, p.m));
}

}  // namespace commfuse::ops
