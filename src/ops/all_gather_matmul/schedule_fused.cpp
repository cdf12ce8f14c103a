// all_gather_matmul, fused: x1's rows are streamed to every rank (Transport::gather_stream)
// and each arriving block is multiplied at once into its output rows: this rank's block
// first (no wait), then the peers' in rotating order, read in place from their shm slots
// (staged through buffers on MPI). gather_out rows are written in the same pass that feeds
// the GEMM. comm_turn c > 0 cuts each rank's rows into c pieces of ceil(m/c) rows (SPEC §2);
// 0 lets the transport choose (one shm slot per piece). With few rows per rank (decode) the
// blocks are staged as they arrive and multiplied by one GEMM at the end (plan.hpp).
#include <cstring>

#include "ops/all_gather_matmul/plan.hpp"

namespace commfuse::ops {

void run_all_gather_matmul_fused(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                                 void* workspace) {
  const AllGatherMatmulProblem& p = plan.problem;
  const RowGemm gemm(plan.gemm, workspace);
  const uint64_t row_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.k));
  const uint64_t out_row_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.n));
  const auto* x1 = static_cast<const uint8_t*>(p.x1);
  auto* out = static_cast<uint8_t*>(p.output);
  auto* gathered = static_cast<uint8_t*>(p.gather_out);

  comm::GatherStream gs;
  gs.bytes = static_cast<uint64_t>(p.m) * row_bytes;  // m == 0 still synchronizes (SPEC §2)
  gs.unit = row_bytes;
  if (p.comm_turn > 0)
    gs.max_piece = static_cast<uint64_t>((p.m + p.comm_turn - 1) / p.comm_turn) * row_bytes;
  gs.pack = [&](uint8_t* dst, uint64_t off, uint64_t n) { std::memcpy(dst, x1 + off, n); };
  void* staging = static_cast<uint8_t*>(workspace) + plan.staging_offset;
  gs.on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
    const int64_t row = static_cast<int64_t>(src) * p.m + static_cast<int64_t>(off / row_bytes);
    const auto rows = static_cast<int64_t>(n / row_bytes);
    // This rank's own rows come from x1 itself, still warm in cache from pack.
    const uint8_t* a = src == p.rank ? x1 + off : data;
    void* a_copy =
        gathered != nullptr ? gathered + static_cast<uint64_t>(row) * row_bytes : nullptr;
    if (plan.batched)
      gemm.stage(a, rows, row, staging, a_copy);
    else
      gemm.run(a, rows, out + static_cast<uint64_t>(row) * out_row_bytes, a_copy);
  };
  comm.transport().gather_stream(gs);
  if (plan.batched) gemm.run_staged(staging, p.m * p.world_size, out);
}

}  // namespace commfuse::ops
