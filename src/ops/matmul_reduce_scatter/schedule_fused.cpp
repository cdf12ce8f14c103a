// matmul_reduce_scatter, fused: an all_to_all_stream of fp32 partial products, computed in
// blocks on demand (LazyPartial). For each piece, on shm pack copies this rank's partial
// rows destined for each peer into its slot; over MPI they are sent from the partial
// itself (AllToAllStream::view); this rank's own rows are read in place either way. The
// owner sums the R partials of its rows in rank order 0..R-1, adds the bias once and rounds
// once, reading the peers' partials in place (SPEC §0, §2). Any transport.
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse::ops {

void run_matmul_reduce_scatter_fused(const MatmulReduceScatterPlanData& plan, comm::CommImpl& comm,
                                     void* workspace) {
  const PartialGemm gemm(plan.gemm, plan.problem, workspace);
  reduce_scatter_partials(plan.problem, gemm, comm, workspace, plan.problem.output);
}

}  // namespace commfuse::ops
