// matmul_all_reduce planning: schedule and workspace.
#include "ops/matmul_all_reduce/plan.hpp"

#include <vector>

#include "ops/common/algorithm.hpp"

namespace commfuse::ops {

const char* schedule_name(MatmulAllReduceSchedule s) {
  switch (s) {
    case MatmulAllReduceSchedule::kFused:
      return "fused";
    case MatmulAllReduceSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

MatmulAllReducePlanData plan_matmul_all_reduce(MatmulReduceProblem problem) {
  MatmulAllReducePlanData plan;
  plan.problem = std::move(problem);
  const MatmulReduceProblem& p = plan.problem;
  const std::vector<AlgorithmEntry> list{{"fused", ""}, {"unfused", ""}};
  plan.schedule = static_cast<MatmulAllReduceSchedule>(choose_algorithm(
      kMatmulAllReduceOp,
      detail::cat(kMatmulAllReduceOp, "(rank ", p.rank, ") m=", p.m, " R=", p.world_size,
                  " k=", p.k, " n=", p.n, " ", dtype_name(p.dtype)),
      list));
  plan.workspace_bytes = matmul_reduce_workspace_bytes(p);
  if (plan.schedule == MatmulAllReduceSchedule::kUnfused)  // + the collective's fp32 result
    plan.workspace_bytes += static_cast<size_t>(p.m * p.n) * sizeof(float);
  plan.gemm = partial_product_shape(p);
  plan_row_gemm(plan.gemm);
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
