// alltoall_quant_matmul, fused: one all_to_all_stream whose unit is one token row.
//
//   pack      copies this rank's rows for a destination into the transport (on shm straight
//             into this rank's shared slot; A4W4 appends each row's fp32 token scale).
//   on_all    sees, for a piece of rows, the segments from all R source ranks in rank order,
//             in place (on shm: in the peers' slots). Each permuted row is assembled,
//             quantized and stored in one pass over the peers' data: the segments are
//             widened into a K-float row buffer that stays in L1/L2 while the smooth scale
//             is applied and amax taken over it, then quantized from there (quantize_row,
//             the unfused pass's own). Quantizing in on_all rather than per segment in
//             on_piece is what keeps it one pass over the peers' data: the row's scale needs
//             the amax of all R segments before any value can be rounded, and on_all is the
//             first point where they are all readable.
//   GEMM      once gemm_rows rows are assembled the int GEMM runs on them and the epilogue
//             writes their output rows (QuantGemm, shared with the unfused schedule); the
//             last chunk runs after the stream. On shm the default is one chunk (plan.hpp,
//             gemm_chunk_rows says why).
#include <cstring>

#include "exec/stream.hpp"
#include "kernels/cpu/copy.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/alltoall_quant_matmul/quant_gemm.hpp"
#include "ops/alltoall_quant_matmul/row_kernels.hpp"

namespace commfuse::ops {
namespace {

using namespace a2aq;

class FusedRun {
 public:
  FusedRun(const AlltoAllQuantMatmulPlanData& plan, uint8_t* ws)
      : plan_(plan), p_(plan.problem), gemm_(plan, ws) {
    rows_ = p_.rows();
    k_ = p_.k();
    R_ = p_.world_size;
    a4w4_ = p_.combo == QuantCombo::kA4W4;
    es_ = a4w4_ ? 0 : dtype_storage_bytes(p_.x1_dtype, 1);
    seg_bytes_ = a4w4_ ? static_cast<size_t>(p_.h / 2) : static_cast<size_t>(p_.h) * es_;
    unit_ = seg_bytes_ + (a4w4_ ? sizeof(float) : 0);
  }

  void run(comm::Transport& t) {
    comm::AllToAllStream st;
    st.bytes = static_cast<uint64_t>(rows_) * unit_;
    st.unit = unit_;
    st.max_piece = static_cast<uint64_t>(kPieceRows) * unit_;
    st.pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) { pack(to, dst, off, n); };
    // Destination `to`'s rows are x1's block `to` (A4W4 appends each row's scale: packed).
    if (!a4w4_) st.source = static_cast<const uint8_t*>(p_.x1);
    st.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
      assemble(parts, off, n);
    };
    exec::all_to_all_stream(t, st);
    if (done_ < rows_) gemm_.run(done_, rows_);  // the last chunk, after the stream
  }

 private:
  // Rows [off/unit, (off+n)/unit) of this rank's block for destination `to`.
  void pack(int to, uint8_t* dst, uint64_t off, uint64_t n) {
    const int64_t first = to * rows_ + static_cast<int64_t>(off / unit_);
    const auto* x1 = static_cast<const uint8_t*>(p_.x1);
    if (!a4w4_) {
      kernels::cpu::copy(dst, x1 + static_cast<size_t>(first) * unit_, n);
      return;
    }
    for (uint64_t j = 0; j < n / unit_; ++j) {
      const int64_t r = first + static_cast<int64_t>(j);
      kernels::cpu::copy(dst + j * unit_, x1 + static_cast<size_t>(r) * seg_bytes_, seg_bytes_);
      std::memcpy(dst + j * unit_ + seg_bytes_, p_.token_scale + r, sizeof(float));
    }
  }

  void assemble(const uint8_t* const* parts, uint64_t off, uint64_t n) {
    const int64_t r0 = static_cast<int64_t>(off / unit_);
    const int64_t nr = static_cast<int64_t>(n / unit_);
    const size_t h = static_cast<size_t>(p_.h), k = static_cast<size_t>(k_);
    auto* a2a = static_cast<uint8_t*>(p_.all_to_all_out);
    int8_t* const qmat = gemm_.q();
    float* const scales = gemm_.scales();
    float* const row = gemm_.row();
    const float* const smooth = gemm_.smooth();
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t i = r0 + j;
      int8_t* q = qmat + static_cast<size_t>(i) * k;
      if (a4w4_) {
        for (int s = 0; s < R_; ++s) {
          const uint8_t* seg = parts[s] + static_cast<size_t>(j) * unit_;
          unpack_int4(seg, gemm_.q_segment(s) + static_cast<size_t>(i) * h, h);
          std::memcpy(&scales[static_cast<size_t>(i) * R_ + s], seg + seg_bytes_, sizeof(float));
          if (a2a)
            kernels::cpu::copy(a2a + (static_cast<size_t>(i) * R_ + s) * seg_bytes_, seg,
                               seg_bytes_);
        }
        continue;
      }
      for (int s = 0; s < R_; ++s) {
        const uint8_t* seg = parts[s] + static_cast<size_t>(j) * unit_;
        widen_half(seg, p_.x1_dtype, row + static_cast<size_t>(s) * h, h);
        if (a2a)
          kernels::cpu::copy(a2a + (static_cast<size_t>(i) * R_ + s) * seg_bytes_, seg, seg_bytes_);
      }
      scales[i] = quantize_row(row, k, smooth, plan_.qmax, q);
    }
    const int64_t assembled = r0 + nr;
    if (assembled - done_ >= plan_.gemm_rows && assembled < rows_) {
      gemm_.run(done_, assembled);
      done_ = assembled;
    }
  }

  const AlltoAllQuantMatmulPlanData& plan_;
  const AlltoAllQuantMatmulProblem& p_;
  QuantGemm gemm_;
  int64_t rows_ = 0, k_ = 0, done_ = 0;
  size_t es_ = 0, seg_bytes_ = 0, unit_ = 0;
  int R_ = 1;
  bool a4w4_ = false;
};

}  // namespace

void run_alltoall_quant_matmul_fused(const AlltoAllQuantMatmulPlanData& plan, comm::CommImpl& comm,
                                     void* workspace) {
  FusedRun run(plan, static_cast<uint8_t*>(workspace));
  run.run(comm.transport());
}

}  // namespace commfuse::ops
