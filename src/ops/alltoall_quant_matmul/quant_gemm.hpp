// What alltoall_quant_matmul's schedules run once rows are quantized (quant_gemm.cpp): the
// operands prepared once per execute (x2 as the int GEMM reads it, the smooth scale and the
// bias in fp32, all in the workspace), then per block of rows the int GEMM and the SPEC §3
// epilogue into the output. One implementation for the fused and unfused schedules, so
// they give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/alltoall_quant_matmul/plan.hpp"

namespace commfuse::ops {

class QuantGemm {
 public:
  QuantGemm(const AlltoAllQuantMatmulPlanData& plan, uint8_t* ws);

  int8_t* q() const { return q_; }  // rows x K quantized activations (A16)
  // The activations of segment s (A16: the one segment, q itself; A4W4: source rank s's
  // part of every row), rows x seg_k dense: oneDNN's AMX/VNNI int8 kernel takes a dense a
  // only (on A4W4's rows x K with a stride it fell back to gemm:jit, 2048 x 2048 x 4096 in
  // 57 ms against the A16 GEMM's 2048 x 4096 x 4096 in 45 ms on the AMX Xeon).
  int8_t* q_segment(int s) const {
    return q_ + static_cast<size_t>(s) * static_cast<size_t>(p_.rows() * seg_k_);
  }
  float* scales() const { return scales_; }        // A16: per row; A4W4: row i, segment s at i*R+s
  float* row() const { return row_; }              // K floats: one row being quantized
  const float* smooth() const { return smooth_; }  // K floats, or null without smooth scale

  // Rows [r0, r1) of q (at most a chunk's rows): int GEMM, then the epilogue row by row, in
  // blocks of the plan's epilogue_rows where it has them (A4W4: one GEMM per source
  // segment, their dequantized products summed in rank order, then the bias).
  void run(int64_t r0, int64_t r1);

 private:
  kernels::cpu::IntMatmulDesc desc(int64_t m, int64_t kk) const;
  // The epilogue of rows [b0, b0 + mb), whose segment-s sums are in acc_.
  void dequant_block(int64_t b0, int64_t mb, int s);
  // x2's rows (columns when transposed) [s*seg_k, (s+1)*seg_k) as int8 in x2's own layout
  // (an int4 x2 unpacked first, if it was not yet: not for concurrent calls, as run() is not).
  const int8_t* plain_segment(int s);
  // int4 x2 -> int8 at unpacked_, which plain_b_ then points to.
  void unpack_x2();

  const AlltoAllQuantMatmulPlanData& plan_;
  const AlltoAllQuantMatmulProblem& p_;
  int64_t k_ = 0;
  size_t n_ = 0;
  int segments_ = 1;   // GEMMs per block: A4W4 one per source rank (R), else 1
  int64_t seg_k_ = 0;  // their inner dimension: A4W4 H, else K
  int8_t* q_ = nullptr;
  float* scales_ = nullptr;
  float* row_ = nullptr;
  float* out_row_ = nullptr;
  float* yacc_ = nullptr;
  int32_t* acc_ = nullptr;
  const void* b_ = nullptr;        // x2 as the GEMMs read it
  const void* plain_b_ = nullptr;  // x2 as int8 in its own layout
  int8_t* unpacked_ = nullptr;     // where an int4 x2 is still to be unpacked (else null)
  float* smooth_ = nullptr;
  float* bias32_ = nullptr;
};

}  // namespace commfuse::ops
