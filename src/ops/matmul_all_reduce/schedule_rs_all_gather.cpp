// matmul_all_reduce in two phases: matmul_reduce_scatter's fused schedule sums this rank's
// m/R rows of the partial products (peers' partials read in place from their slots on shm),
// adds the bias and rounds once; then the ranks all_gather the rounded rows. Each row is
// summed once, by its owner, instead of on every rank, and phase two moves output-dtype
// bytes instead of fp32. Bit for bit the one-pass result (the same fp32 sums in the same
// rank order, one rounding; phase two only copies), so every rank's output is identical.
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse::ops {

void run_matmul_all_reduce_rs_all_gather(const MatmulAllReducePlanData& plan, comm::CommImpl& comm,
                                         void* workspace) {
  const MatmulReduceProblem& p = plan.problem;
  const PartialGemm gemm(plan.gemm, plan.problem, workspace);
  void* mine = static_cast<uint8_t*>(workspace) + plan.own_rows_offset;
  reduce_scatter_partials(p, gemm, comm, workspace, mine);
  comm.transport().all_gather(mine, p.output, static_cast<uint64_t>(p.m / p.world_size * p.n),
                              p.out_dtype);
}

}  // namespace commfuse::ops
