// matmul_all_reduce planning: schedule and workspace.
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(MatmulAllReduceSchedule s) {
  switch (s) {
    case MatmulAllReduceSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

MatmulAllReducePlanData plan_matmul_all_reduce(MatmulReduceProblem problem) {
  MatmulAllReducePlanData plan;
  plan.problem = std::move(problem);
  const MatmulReduceProblem& p = plan.problem;
  plan.schedule = MatmulAllReduceSchedule::kUnfused;
  // fp32: the partial product (m, n), reduced in place, and the bias as fp32.
  plan.workspace_bytes = static_cast<size_t>(p.m * p.n + p.n) * sizeof(float);
  plan.gemm = plan_partial_product(p);
  return plan;
}

}  // namespace commfuse::ops
