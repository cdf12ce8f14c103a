// alltoall_matmul planning: the permuted rows need a home when alltoAllOut is absent.
#include "ops/alltoall_matmul/plan.hpp"

namespace commfuse::ops {

AlltoAllMatmulPlanData plan_alltoall_matmul(AlltoAllMatmulProblem problem) {
  AlltoAllMatmulPlanData plan;
  plan.problem = std::move(problem);
  const AlltoAllMatmulProblem& p = plan.problem;
  if (p.all_to_all_out == nullptr)
    plan.workspace_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.rows() * p.k()));
  return plan;
}

}  // namespace commfuse::ops
