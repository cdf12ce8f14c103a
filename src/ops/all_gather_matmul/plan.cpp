// all_gather_matmul planning: the schedule, the block GEMM and its workspace.
#include "ops/all_gather_matmul/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(AllGatherMatmulSchedule s) {
  switch (s) {
    case AllGatherMatmulSchedule::kFused:
      return "fused";
  }
  return "?";
}

AllGatherMatmulPlanData plan_all_gather_matmul(AllGatherMatmulProblem problem) {
  AllGatherMatmulPlanData plan;
  plan.problem = std::move(problem);
  const AllGatherMatmulProblem& p = plan.problem;
  plan.schedule = AllGatherMatmulSchedule::kFused;
  plan.gemm.dtype = p.dtype;
  plan.gemm.k = p.k;
  plan.gemm.n = p.n;
  plan.gemm.b = p.x2;
  plan.gemm.bias = p.bias;
  plan.gemm.c_dtype = p.dtype;
  // Only the widened x2 and bias when oneDNN needs fp32: gathered rows are multiplied where
  // they arrive, so no gathered copy of x1 is needed even without gather_output.
  plan.workspace_bytes = row_gemm_workspace_bytes(plan.gemm);
  plan.batched = p.m < kBatchedBelowRows && p.world_size > 1;
  if (plan.batched) {
    plan.staging_offset = (plan.workspace_bytes + 63) / 64 * 64;
    plan.workspace_bytes =
        plan.staging_offset + RowGemm::staging_bytes(plan.gemm, p.m * p.world_size);
  }
  return plan;
}

}  // namespace commfuse::ops
