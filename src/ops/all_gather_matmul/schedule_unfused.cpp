// all_gather_matmul, unfused (the reference of the algorithm list): all_gather of x1's rows
// into gather_out (or the workspace), then one GEMM over all m·R rows. Nothing overlaps; it
// is what the fused schedule is measured against, and the choice where it is faster.
#include "ops/all_gather_matmul/plan.hpp"

namespace commfuse::ops {

void run_all_gather_matmul_unfused(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                                   void* workspace) {
  const AllGatherMatmulProblem& p = plan.problem;
  void* gathered = p.gather_out != nullptr ? p.gather_out
                                           : static_cast<uint8_t*>(workspace) + plan.staging_offset;
  if (p.quant.quantized()) {  // SPEC §6: the scales, then the codes, then one product
    const QuantRowGemm gemm(plan.qgemm, workspace);
    const float* scales = gather_row_scales(plan, comm, workspace);
    comm.transport().all_gather(p.x1, gathered, static_cast<uint64_t>(p.m * p.k), p.dtype);
    gemm.run(gathered, p.m * p.world_size, RowScales{scales, true}, p.output, nullptr);
    return;
  }
  const RowGemm gemm(plan.gemm, workspace);
  comm.transport().all_gather(p.x1, gathered, static_cast<uint64_t>(p.m * p.k), p.dtype);
  gemm.run(gathered, p.m * p.world_size, p.output);
}

}  // namespace commfuse::ops
