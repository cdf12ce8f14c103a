// alltoall_matmul, fused: all_to_all_stream with one token row per unit; on_piece copies
// each source's segment of the received rows into its place in the permuted row (on shm
// straight from the peer's slot), and once gemm_chunk_rows() rows are complete (on_all) the
// GEMM runs on them, writing their output rows; the last chunk runs after the stream.
#include <cstring>

#include "exec/stream.hpp"
#include "kernels/cpu/copy.hpp"
#include "ops/alltoall_matmul/plan.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"

namespace commfuse::ops {

void run_alltoall_matmul_fused(const AlltoAllMatmulPlanData& plan, comm::CommImpl& comm,
                               void* workspace) {
  const AlltoAllMatmulProblem& p = plan.problem;
  const int64_t rows = p.rows();
  const size_t es = dtype_storage_bytes(p.dtype, 1);
  const size_t unit = static_cast<size_t>(p.h) * es;
  auto* perm = p.all_to_all_out ? static_cast<uint8_t*>(p.all_to_all_out)
                                : static_cast<uint8_t*>(workspace) + plan.perm_offset;
  const auto* x1 = static_cast<const uint8_t*>(p.x1);
  int64_t done = 0;
  const int64_t gemm_rows = plan.gemm.block_rows;  // gemm_chunk_rows, at plan time

  const RowGemm row_gemm = alltoall_matmul_gemm(plan, workspace);
  auto gemm = [&](int64_t r0, int64_t r1) { alltoall_matmul_rows(p, row_gemm, perm, r0, r1); };

  comm::AllToAllStream st;
  st.bytes = static_cast<uint64_t>(rows) * unit;
  st.unit = unit;
  st.max_piece = static_cast<uint64_t>(kPieceRows) * unit;
  st.pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) {
    kernels::cpu::copy(dst, x1 + static_cast<size_t>(to * rows) * unit + off, n);
  };
  st.source = x1;  // destination `to`'s rows are x1's block `to`: readable in place
  st.on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
    const int64_t r0 = static_cast<int64_t>(off / unit);
    for (uint64_t j = 0; j < n / unit; ++j)
      kernels::cpu::copy(perm + (static_cast<size_t>(r0 + j) * p.world_size + src) * unit,
                         data + j * unit, unit);
  };
  st.on_all = [&](const uint8_t* const*, uint64_t off, uint64_t n) {
    const int64_t assembled = static_cast<int64_t>((off + n) / unit);
    if (assembled - done >= gemm_rows && assembled < rows) {
      gemm(done, assembled);
      done = assembled;
    }
  };
  exec::all_to_all_stream(comm.transport(), st);
  if (done < rows) gemm(done, rows);
}

}  // namespace commfuse::ops
