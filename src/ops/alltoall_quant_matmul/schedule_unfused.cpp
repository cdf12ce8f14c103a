// alltoall_quant_matmul, unfused (the reference of the algorithm list): the collective, then
// the same kernels as the fused schedule, each as its own pass over all rows.
//
//   all_to_all  x1's blocks into the workspace, rows grouped by source rank (A4W4: a second
//               all_to_all for the fp32 token scales, which travel with their rows).
//   permute     permuted row i = the R source rows i side by side (SPEC §3), into
//               alltoAllOut when given, else the workspace.
//   quantize    per permuted row: widened, then times the smooth scale, amax and codes
//               (a2aq::quantize_row, the fused schedule's too). A4W4: the int4 row unpacked
//               to int8 and its per-segment token scales stored.
//   GEMM        one int GEMM over all rows, then the dequant epilogue (QuantGemm, shared
//               with the fused schedule).
// The fp32 operations are the fused schedule's in the same order (amax is a max, exact in
// any grouping), so both give the same bits; `commfuse bench alltoall-quant-matmul`
// measures one against the other.
#include <cstring>

#include "kernels/cpu/copy.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/alltoall_quant_matmul/quant_gemm.hpp"
#include "ops/alltoall_quant_matmul/row_kernels.hpp"

namespace commfuse::ops {

void run_alltoall_quant_matmul_unfused(const AlltoAllQuantMatmulPlanData& plan,
                                       comm::CommImpl& comm, void* workspace) {
  const AlltoAllQuantMatmulProblem& p = plan.problem;
  auto* ws = static_cast<uint8_t*>(workspace);
  QuantGemm gemm(plan, ws);
  const int R = p.world_size;
  const int64_t rows = p.rows();
  const size_t k = static_cast<size_t>(p.k());
  const bool a4w4 = p.combo == QuantCombo::kA4W4;
  const size_t seg_bytes = dtype_storage_bytes(p.x1_dtype, static_cast<size_t>(p.h));
  const size_t row_bytes = seg_bytes * static_cast<size_t>(R);
  uint8_t* recv = ws + plan.ws.recv;
  auto* perm = p.all_to_all_out ? static_cast<uint8_t*>(p.all_to_all_out) : ws + plan.ws.perm;
  comm::Transport& t = comm.transport();

  // The collective: bytes (int4 x1: two values per byte), rows x H per peer.
  t.all_to_all(p.x1, recv, static_cast<uint64_t>(rows) * seg_bytes, DType::kInt8);
  auto* recv_scales = reinterpret_cast<float*>(ws + plan.ws.recv_scales);
  if (a4w4) t.all_to_all(p.token_scale, recv_scales, static_cast<uint64_t>(rows), DType::kFloat32);

  // Permute pass.
  for (int64_t i = 0; i < rows; ++i)
    for (int s = 0; s < R; ++s)
      kernels::cpu::copy(
          perm + static_cast<size_t>(i) * row_bytes + static_cast<size_t>(s) * seg_bytes,
          recv + (static_cast<size_t>(s) * rows + i) * seg_bytes, seg_bytes);

  // Quantize pass.
  int8_t* q = gemm.q();
  float* scales = gemm.scales();
  float* row = gemm.row();
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t* src = perm + static_cast<size_t>(i) * row_bytes;
    int8_t* qi = q + static_cast<size_t>(i) * k;
    if (a4w4) {
      const size_t h = static_cast<size_t>(p.h);
      for (int s = 0; s < R; ++s) {
        unpack_int4(src + static_cast<size_t>(s) * (h / 2),
                    gemm.q_segment(s) + static_cast<size_t>(i) * h, h);
        scales[static_cast<size_t>(i) * R + s] = recv_scales[static_cast<size_t>(s) * rows + i];
      }
      continue;
    }
    a2aq::widen_half(src, p.x1_dtype, row, k);
    scales[i] = a2aq::quantize_row(row, k, gemm.smooth(), plan.qmax, qi);
  }

  // GEMM and dequant pass, over all rows.
  gemm.run(0, rows);
}

}  // namespace commfuse::ops
