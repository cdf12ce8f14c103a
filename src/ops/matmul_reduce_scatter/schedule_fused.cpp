// matmul_reduce_scatter, fused: an all_to_all_stream of fp32 partial products. For each
// piece, pack copies this rank's partial rows destined for each rank (peers first, own
// last; computed in blocks on demand, LazyPartial) into the stream's buffer (this rank's
// shm slot),
// and the owner sums the R partials of its rows in rank order 0..R-1, adds the bias once
// and rounds once, reading the peers' partials in place (SPEC §0, §2). Any transport.
#include <cstring>

#include "ops/common/epilogue.hpp"
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse::ops {

void run_matmul_reduce_scatter_fused(const MatmulReduceScatterPlanData& plan, comm::CommImpl& comm,
                                     void* workspace) {
  const MatmulReduceProblem& p = plan.problem;
  const RowGemm gemm(plan.gemm, workspace);
  float* bias32 = matmul_reduce_bias32(p, workspace);
  widen_bias(p.bias, p.n, bias32);
  const int64_t rows_per_rank = p.m / p.world_size;
  const uint64_t row_bytes = static_cast<uint64_t>(p.n) * sizeof(float);
  const uint64_t out_row_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.n));
  auto* out = static_cast<uint8_t*>(p.output);

  comm::AllToAllStream as;
  as.bytes = static_cast<uint64_t>(rows_per_rank) * row_bytes;
  as.unit = row_bytes;
  as.max_piece = matmul_reduce_piece_bytes(p, rows_per_rank);
  LazyPartial partial(gemm, p, matmul_reduce_partial(p, workspace), p.world_size, rows_per_rank);
  as.pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) {
    std::memcpy(dst,
                partial.rows(to, static_cast<int64_t>(off / row_bytes),
                             static_cast<int64_t>(n / row_bytes)),
                n);
  };
  as.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
    const auto* const* fparts = reinterpret_cast<const float* const*>(parts);
    sum_bias_round(fparts, p.world_size, static_cast<int64_t>(n / row_bytes), p.n,
                   p.bias.data != nullptr ? bias32 : nullptr, out + off / row_bytes * out_row_bytes,
                   p.dtype);
  };
  comm.transport().all_to_all_stream(as);
}

}  // namespace commfuse::ops
