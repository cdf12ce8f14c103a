// alltoall_matmul, unfused (the reference of the algorithm list): the plain all_to_all of
// x1's blocks into the workspace (rows grouped by source rank), a permute pass into
// alltoAllOut (or the workspace) so that permuted row i is the R source rows i side by side
// (SPEC §3), then one GEMM over all rows with the same kernel as the fused schedule.
// Nothing overlaps; it is what the fused schedule is measured against.
#include <cstring>

#include "kernels/cpu/copy.hpp"
#include "ops/alltoall_matmul/plan.hpp"

namespace commfuse::ops {

void run_alltoall_matmul_unfused(const AlltoAllMatmulPlanData& plan, comm::CommImpl& comm,
                                 void* workspace) {
  const AlltoAllMatmulProblem& p = plan.problem;
  const int64_t rows = p.rows();
  const size_t row_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.h));
  auto* ws = static_cast<uint8_t*>(workspace);
  uint8_t* recv = ws + plan.recv_offset;
  auto* perm = p.all_to_all_out ? static_cast<uint8_t*>(p.all_to_all_out) : ws + plan.perm_offset;
  comm.transport().all_to_all(p.x1, recv, static_cast<uint64_t>(rows * p.h), p.dtype);
  for (int64_t i = 0; i < rows; ++i)
    for (int s = 0; s < p.world_size; ++s)
      kernels::cpu::copy(perm + (static_cast<size_t>(i) * p.world_size + s) * row_bytes,
                         recv + (static_cast<size_t>(s) * rows + i) * row_bytes, row_bytes);
  alltoall_matmul_rows(p, alltoall_matmul_gemm(plan, workspace), perm, 0, rows);
}

}  // namespace commfuse::ops
