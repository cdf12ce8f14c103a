// quant_all_reduce in two phases, for shm with many ranks (and off shm where it moves fewer
// bytes: rs_all_gather_moves_less): each rank sums only its own
// 1/R of the rows from every rank's quantized rows (the reduce-scatter's fused stream,
// read in place, one rounding), then the ranks all_gather the rounded blocks. Each element
// is dequantized once per rank instead of R times, which is what matters when R ranks
// share few cores; the result is bit for bit the one-pass schedule's (same fp32 sums in
// the same rank order, rounded once; phase two only copies). Needs rows % R == 0. Over
// MPI phase two puts output-dtype bytes on the wire, which pays only with enough ranks.
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse::ops {

void run_quant_all_reduce_rs_all_gather(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                        void* workspace) {
  const QuantReduceProblem& p = plan.problem;
  const uint64_t block = static_cast<uint64_t>(p.rows / p.world_size * p.h);
  auto* mine = static_cast<uint8_t*>(workspace);
  // Summed in place (never streamed): the all_gather reads the block right back.
  reduce_own_block(p, comm.transport(), mine,
                   {reinterpret_cast<float*>(mine + plan.block_bytes), false});
  comm.transport().all_gather(mine, p.output, block, p.out_dtype);
}

}  // namespace commfuse::ops
