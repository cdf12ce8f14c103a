// quant_reduce_scatter, fused: an all-to-all stream whose unit is one token row (H codes +
// its scales). pack(to) copies this rank's rows of block `to` into the slot (on shm the
// only copy); on_all reads every rank's rows of this rank's block in place, in rank order,
// dequantizes them into one fp32 accumulator row and rounds once into the output
// (reduce_own_block, ops/common/quant_reduce.cpp). On MPI the stream is staged: only codes
// and scales cross the wire.
#include "ops/quant_reduce_scatter/plan.hpp"

namespace commfuse::ops {

void run_quant_reduce_scatter_all_to_all_stream(const QuantReduceScatterPlanData& plan,
                                                comm::CommImpl& comm, void* workspace) {
  reduce_own_block(plan.problem, comm.transport(), plan.problem.output,
                   {static_cast<float*>(workspace), plan.stream_out});
}

}  // namespace commfuse::ops
