// all_gather_matmul, fused: x1's rows are streamed to every rank (Transport::gather_stream)
// and each arriving block is handed over at once: this rank's block first (no wait), then
// the peers' in rotating order, read in place from their shm slots (pipelined through
// staging on MPI). gather_out rows are written in the same pass that feeds the GEMM.
// comm_turn c > 0 caps pieces at ceil(m/c) rows (SPEC §2; the transport may cut them
// smaller: one shm slot, 1 MiB on MPI); 0 lets the transport choose. When fp32 x2 stays in
// cache each block is multiplied on arrival; otherwise blocks are staged (widened in the
// same pass) and multiplied in GEMMs of up to plan.gemm_rows rows (RowBatcher, plan.hpp);
// rows that need no widening and fit one GEMM are staged in gather_out itself
// (plan.stage_in_gather_out) and multiplied there. On shm with CMA the transport may read
// the peers' rows straight into gather_out (GatherStream::land): then nothing is copied
// again here.
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "exec/stream.hpp"
#include "kernels/cpu/copy.hpp"
#include "ops/all_gather_matmul/plan.hpp"

namespace commfuse::ops {
namespace {

// Gathers arriving row blocks into GEMMs of up to `cap` rows (plan.hpp: gemm_rows).
class RowBatcher {
 public:
  RowBatcher(const RowGemm& gemm, int64_t cap, void* staging, uint8_t* staged_out, uint8_t* out,
             size_t out_row_bytes)
      : gemm_(gemm),
        cap_(cap),
        staging_(staging),
        staged_out_(staged_out),
        out_(out),
        out_row_bytes_(out_row_bytes) {}

  // rows of a (their output rows start at out_row); a_copy: where gather_out wants them.
  void add(const uint8_t* a, int64_t rows, int64_t out_row, void* a_copy) {
    if (rows >= cap_) {  // big enough on its own
      gemm_.run(a, rows, out_ + static_cast<size_t>(out_row) * out_row_bytes_, a_copy);
      return;
    }
    if (staged_ + rows > cap_) flush();
    gemm_.stage(a, rows, staged_, staging_, a_copy);
    segments_.push_back({out_row, rows});
    staged_ += rows;
    if (staged_ == cap_) flush();
  }

  void flush() {
    if (staged_ == 0) return;
    // Consecutive segments land in place; otherwise via the staged output.
    bool contiguous = true;
    for (size_t i = 1; i < segments_.size(); ++i)
      contiguous =
          contiguous && segments_[i].first == segments_[i - 1].first + segments_[i - 1].second;
    if (contiguous) {
      gemm_.run_staged(staging_, staged_,
                       out_ + static_cast<size_t>(segments_[0].first) * out_row_bytes_);
    } else {
      gemm_.run_staged(staging_, staged_, staged_out_);
      size_t at = 0;
      for (const auto& [row, count] : segments_) {
        const size_t bytes = static_cast<size_t>(count) * out_row_bytes_;
        kernels::cpu::copy(out_ + static_cast<size_t>(row) * out_row_bytes_, staged_out_ + at,
                           bytes);
        at += bytes;
      }
    }
    staged_ = 0;
    segments_.clear();
  }

 private:
  const RowGemm& gemm_;
  int64_t cap_;
  void* staging_;
  uint8_t* staged_out_;
  uint8_t* out_;
  size_t out_row_bytes_;
  int64_t staged_ = 0;
  std::vector<std::pair<int64_t, int64_t>> segments_;  // (output row, rows) in staging order
};

// The stream of x1's rows every schedule of this file runs (on_piece left to the caller, who
// hands it over by reference, std::ref: a std::function holding a lambda of several
// references allocates on every call, a cost a tiny op measures).
comm::GatherStream row_stream(const AllGatherMatmulProblem& p, uint64_t row_bytes) {
  const auto* x1 = static_cast<const uint8_t*>(p.x1);
  comm::GatherStream gs;
  gs.bytes = static_cast<uint64_t>(p.m) * row_bytes;  // m == 0 still synchronizes (SPEC §2)
  gs.unit = row_bytes;
  if (p.comm_turn > 0) gs.max_piece = static_cast<uint64_t>(stream_piece_rows(p)) * row_bytes;
  gs.pack = [x1](uint8_t* dst, uint64_t off, uint64_t n) { kernels::cpu::copy(dst, x1 + off, n); };
  // A single-copy transport may read the peers' x1 straight into gather_out (then on_piece's
  // data is the gather_out row itself: see copy_target / copy_unless_landed).
  gs.source = x1;
  if (auto* gathered = static_cast<uint8_t*>(p.gather_out); gathered != nullptr)
    gs.land = [gathered, bytes = gs.bytes](int src, uint64_t off) {
      return gathered + static_cast<uint64_t>(src) * bytes + off;
    };
  return gs;
}

// Where gather_out wants the rows at `data`, or null when they already are there (the
// transport landed them in place).
void* copy_target(uint8_t* row_in_gather_out, const uint8_t* data) {
  return row_in_gather_out == data ? nullptr : row_in_gather_out;
}

// Copies n bytes to dst unless the transport landed them there already.
void copy_unless_landed(uint8_t* dst, const uint8_t* data, uint64_t n) {
  if (dst != data) kernels::cpu::copy(dst, data, n);
}

// SPEC §6: every arriving block of codes through the quantized product with its rows'
// scales (gathered first), read in place from the peer's slot, copied to gather_out in the
// same call.
void run_quantized_fused(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                         void* workspace) {
  const AllGatherMatmulProblem& p = plan.problem;
  const QuantRowGemm gemm(plan.qgemm, workspace);
  const float* scales = gather_row_scales(plan, comm, workspace);
  const uint64_t row_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.k));
  const uint64_t out_row_bytes = dtype_storage_bytes(p.out_dtype, static_cast<size_t>(p.n));
  const auto* x1 = static_cast<const uint8_t*>(p.x1);
  auto* out = static_cast<uint8_t*>(p.output);
  auto* gathered = static_cast<uint8_t*>(p.gather_out);
  comm::GatherStream gs = row_stream(p, row_bytes);
  if (plan.gemm_rows > 1) {  // staged: every block to its row, then one product (plan.cpp)
    auto* staged = plan.stage_in_gather_out
                       ? gathered
                       : static_cast<uint8_t*>(workspace) + plan.staging_offset;
    auto on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
      copy_unless_landed(staged + static_cast<uint64_t>(src) * gs.bytes + off,
                         src == p.rank ? x1 + off : data, n);
    };
    gs.on_piece = std::ref(on_piece);
    exec::gather_stream(comm.transport(), gs);
    gemm.run(staged, p.m * p.world_size, RowScales{scales, true}, out, nullptr);
    return;
  }
  auto on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
    const int64_t row = static_cast<int64_t>(src) * p.m + static_cast<int64_t>(off / row_bytes);
    const uint8_t* a = src == p.rank ? x1 + off : data;
    gemm.run(a, static_cast<int64_t>(n / row_bytes), RowScales{scales + row, true},
             out + static_cast<uint64_t>(row) * out_row_bytes,
             gathered != nullptr ? copy_target(gathered + static_cast<uint64_t>(row) * row_bytes, a)
                                 : nullptr);
  };
  gs.on_piece = std::ref(on_piece);
  exec::gather_stream(comm.transport(), gs);
}

}  // namespace

void run_all_gather_matmul_fused(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                                 void* workspace) {
  const AllGatherMatmulProblem& p = plan.problem;
  if (p.quant.quantized()) {
    run_quantized_fused(plan, comm, workspace);
    return;
  }
  const RowGemm gemm(plan.gemm, workspace);
  const uint64_t row_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.k));
  const uint64_t out_row_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.n));
  const auto* x1 = static_cast<const uint8_t*>(p.x1);
  auto* out = static_cast<uint8_t*>(p.output);
  auto* gathered = static_cast<uint8_t*>(p.gather_out);

  comm::GatherStream gs = row_stream(p, row_bytes);
  if (plan.stage_in_gather_out) {
    // Every row to its gather_out row as it arrives, then one GEMM there.
    auto on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
      copy_unless_landed(gathered + static_cast<uint64_t>(src) * gs.bytes + off,
                         src == p.rank ? x1 + off : data, n);
    };
    gs.on_piece = std::ref(on_piece);
    exec::gather_stream(comm.transport(), gs);
    gemm.run_staged(gathered, p.m * p.world_size, out);
    return;
  }
  auto* ws = static_cast<uint8_t*>(workspace);
  RowBatcher batcher(gemm, plan.gemm_rows, ws + plan.staging_offset, ws + plan.staged_out_offset,
                     out, out_row_bytes);
  auto on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
    const int64_t row = static_cast<int64_t>(src) * p.m + static_cast<int64_t>(off / row_bytes);
    const auto rows = static_cast<int64_t>(n / row_bytes);
    // This rank's own rows come from x1 itself, still warm in cache from pack.
    const uint8_t* a = src == p.rank ? x1 + off : data;
    void* a_copy = gathered != nullptr
                       ? copy_target(gathered + static_cast<uint64_t>(row) * row_bytes, a)
                       : nullptr;
    batcher.add(a, rows, row, a_copy);
  };
  gs.on_piece = std::ref(on_piece);
  exec::gather_stream(comm.transport(), gs);
  batcher.flush();
}

}  // namespace commfuse::ops
