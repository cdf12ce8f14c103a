// all_gather_matmul, unfused: the transport's all_gather of x1 (rank-order row blocks), then
// one GEMM over all m·R rows with the bias, fp32 accumulation and one rounding. Correct on
// every transport; the reference the fused schedules are measured against.
#include "ops/all_gather_matmul/plan.hpp"

namespace commfuse::ops {

void run_all_gather_matmul_unfused(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                                   void* workspace) {
  const AllGatherMatmulProblem& p = plan.problem;
  void* gathered = p.gather_out != nullptr ? p.gather_out : workspace;
  // m == 0 still synchronizes (SPEC §2): every rank takes part in the all_gather.
  comm.transport().all_gather(p.x1, gathered, static_cast<uint64_t>(p.m * p.k), p.dtype);
  if (plan.gemm) kernels::cpu::matmul(*plan.gemm, gathered, p.x2.data, p.bias.data, p.output);
}

}  // namespace commfuse::ops
