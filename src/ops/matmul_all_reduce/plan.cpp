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

}  // namespace commfuse::ops
