// matmul_all_reduce, fused: a gather_stream of fp32 partial products. For each piece of
// rows, pack copies the partial rows (computed in blocks on demand, LazyPartial) into the
// stream's buffer (this rank's shm slot) and
// every rank sums all R partials in rank order 0..R-1, adds the bias once and rounds once,
// reading the peers' partials in place. Every rank sums the same values in the same order,
// so the output is bitwise identical on all ranks (SPEC §0, §2). Any transport.
#include <cstring>
#include <functional>

#include "exec/stream.hpp"
#include "kernels/cpu/copy.hpp"
#include "ops/common/epilogue.hpp"
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse::ops {

void run_matmul_all_reduce_fused(const MatmulAllReducePlanData& plan, comm::CommImpl& comm,
                                 void* workspace) {
  const MatmulReduceProblem& p = plan.problem;
  const PartialGemm gemm(plan.gemm, plan.problem, workspace);
  float* bias32 = matmul_reduce_bias32(plan.gemm, workspace);
  widen_bias(p.bias, p.n, bias32);
  const uint64_t row_bytes = static_cast<uint64_t>(p.n) * sizeof(float);
  const uint64_t out_row_bytes = dtype_storage_bytes(p.out_dtype, static_cast<size_t>(p.n));
  auto* out = static_cast<uint8_t*>(p.output);

  comm::GatherStream gs;
  gs.bytes = static_cast<uint64_t>(p.m) * row_bytes;
  gs.unit = row_bytes;
  gs.max_piece = matmul_reduce_piece_bytes(p, p.m);
  LazyPartial partial(gemm, p, matmul_reduce_partial(plan.gemm, p, workspace), 1, p.m,
                      comm.transport().overlaps_compute());
  // By reference (std::ref): a std::function copying these lambdas would allocate per call.
  auto pack = [&](uint8_t* dst, uint64_t off, uint64_t n) {
    kernels::cpu::copy(
        dst,
        partial.rows(0, static_cast<int64_t>(off / row_bytes), static_cast<int64_t>(n / row_bytes)),
        n);
  };
  auto on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
    const auto* const* fparts = reinterpret_cast<const float* const*>(parts);
    sum_bias_round(fparts, p.world_size, static_cast<int64_t>(n / row_bytes), p.n,
                   p.bias.data != nullptr ? bias32 : nullptr, out + off / row_bytes * out_row_bytes,
                   p.out_dtype);
  };
  gs.pack = std::ref(pack);
  gs.on_all = std::ref(on_all);
  exec::gather_stream(comm.transport(), gs);
}

}  // namespace commfuse::ops
