// all_gather_matmul planning: the GEMM descriptor, the schedule and its workspace.
#include "ops/all_gather_matmul/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(AllGatherMatmulSchedule s) {
  switch (s) {
    case AllGatherMatmulSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

AllGatherMatmulPlanData plan_all_gather_matmul(AllGatherMatmulProblem problem) {
  AllGatherMatmulPlanData plan;
  plan.problem = std::move(problem);
  const AllGatherMatmulProblem& p = plan.problem;
  plan.schedule = AllGatherMatmulSchedule::kUnfused;
  // Without gather_output the gathered rows still have to live somewhere for the GEMM.
  if (p.gather_out == nullptr)
    plan.workspace_bytes =
        dtype_storage_bytes(p.dtype, static_cast<size_t>(p.m * p.world_size * p.k));
  const int64_t rows = p.m * p.world_size;
  if (rows > 0) {
    kernels::cpu::MatmulDesc d;
    d.m = rows;
    d.k = p.k;
    d.n = p.n;
    d.a_dtype = d.b_dtype = d.c_dtype = p.dtype;
    d.b_transposed = p.x2.transposed;
    d.lda = p.k;
    d.ldb = p.x2.ld;
    d.ldc = p.n;
    d.has_bias = p.bias.data != nullptr;
    d.bias_dtype = d.has_bias ? p.bias.dtype : DType::kFloat32;
    plan.gemm = kernels::cpu::plan_matmul(d);
  }
  return plan;
}

}  // namespace commfuse::ops
