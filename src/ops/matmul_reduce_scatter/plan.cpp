// matmul_reduce_scatter planning: schedule and workspace.
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(MatmulReduceScatterSchedule s) {
  switch (s) {
    case MatmulReduceScatterSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

MatmulReduceScatterPlanData plan_matmul_reduce_scatter(MatmulReduceProblem problem) {
  MatmulReduceScatterPlanData plan;
  plan.problem = std::move(problem);
  const MatmulReduceProblem& p = plan.problem;
  plan.schedule = MatmulReduceScatterSchedule::kUnfused;
  // fp32: the partial product (m, n), this rank's reduced block (m/R, n), the bias as fp32.
  const int64_t floats = p.m * p.n + (p.m / p.world_size) * p.n + p.n;
  plan.workspace_bytes = static_cast<size_t>(floats) * sizeof(float);
  plan.gemm = plan_partial_product(p);
  return plan;
}

}  // namespace commfuse::ops
