// quant_reduce_scatter, fused: an all-to-all stream whose unit is one token row (H codes +
// its scales). pack(to) copies this rank's rows of block `to` into the slot (on shm the
// only copy); on_all reads every rank's rows of this rank's block in place, in rank order,
// dequantizes them into one fp32 accumulator row and rounds once into the output. On MPI
// the stream is staged: only codes and scales cross the wire.
#include "ops/quant_reduce_scatter/plan.hpp"

namespace commfuse::ops {

void run_quant_reduce_scatter_all_to_all_stream(const QuantReduceScatterPlanData& plan,
                                                comm::CommImpl& comm, void* workspace) {
  const QuantReduceProblem& p = plan.problem;
  const uint64_t unit = static_cast<uint64_t>(p.unit());
  const int64_t block_rows = p.rows / p.world_size;
  const size_t out_row_bytes = static_cast<size_t>(p.h) * (dtype_bits(p.out_dtype) / 8);
  float* acc = static_cast<float*>(workspace);
  comm::AllToAllStream as;
  as.bytes = static_cast<uint64_t>(block_rows) * unit;
  as.unit = unit;
  as.max_piece = quant_piece_bytes(p, comm.transport());
  as.pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) {
    pack_rows(p, to * block_rows + static_cast<int64_t>(off / unit), static_cast<int64_t>(n / unit),
              dst);
  };
  as.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
    void* out = static_cast<uint8_t*>(p.output) + off / unit * out_row_bytes;
    sum_rows(p, parts, static_cast<int64_t>(n / unit), out, acc);
  };
  comm.transport().all_to_all_stream(as);
}

}  // namespace commfuse::ops
