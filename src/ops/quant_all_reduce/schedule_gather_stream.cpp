// quant_all_reduce, fused: a gather stream whose unit is one token row (H codes + that
// row's scales). pack copies this rank's rows into its slot (on shm: its symmetric region,
// the only copy made); on_all reads every rank's rows of the piece in place, in rank order,
// dequantizes them into one fp32 accumulator row and rounds it once into the output. Pieces
// are as large as the transport allows (quant_piece_bytes). Off shm fused_scales_first is
// preferred: it sends the codes from x instead of packing wire rows. Every rank sums the
// same bytes in the same order: identical bits.
#include "exec/stream.hpp"
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse::ops {

void run_quant_all_reduce_gather_stream(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                        void* workspace) {
  const QuantReduceProblem& p = plan.problem;
  const uint64_t unit = static_cast<uint64_t>(p.unit());
  const size_t out_row_bytes = static_cast<size_t>(p.h) * (dtype_bits(p.out_dtype) / 8);
  const SumScratch acc{static_cast<float*>(workspace), plan.stream_out};
  comm::GatherStream gs;
  gs.bytes = static_cast<uint64_t>(p.rows) * unit;
  gs.unit = unit;
  gs.max_piece = quant_piece_bytes(p, comm.transport());
  gs.pack = [&](uint8_t* dst, uint64_t off, uint64_t n) {
    pack_rows(p, static_cast<int64_t>(off / unit), static_cast<int64_t>(n / unit), dst);
  };
  gs.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
    void* out = static_cast<uint8_t*>(p.output) + off / unit * out_row_bytes;
    sum_rows(p, parts, static_cast<int64_t>(n / unit), out, acc);
  };
  exec::gather_stream(comm.transport(), gs);
}

}  // namespace commfuse::ops
