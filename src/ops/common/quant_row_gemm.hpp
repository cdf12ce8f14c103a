// The quantized block product of SPEC §6, what the three §2 operators run in quantized mode:
// rows of x1's codes (a peer's block read in place, or all gathered rows) @ x2's codes,
//   y[i, j] = f32(acc[i, j] (+ int32 bias[j])) * (a_scale[i] * b_scale[j]) (+ float bias[j])
// rounded once (RNE) to the output dtype. acc is exact:
//  - A8W8: the int GEMM (kernels/cpu/int_matmul.hpp): oneDNN's s8 kernel where it
//    accumulates in int32 (VNNI / AMX), else the exact k-blocked fp32 path; for a few rows
//    (decode) a direct int32 kernel on x2 in place, whatever the CPU.
//  - FP8 / HiF8: the codes decoded to bf16 (exact: at most 4 significant bits) where oneDNN
//    has a native bf16 GEMM, else to fp32, and multiplied with fp32 accumulation (every
//    product is exact; only the summation order is oneDNN's).
// x2 (and its scale) is prepared once per execute into the workspace; rows are multiplied in
// chunks of at most chunk_rows, so the int32/fp32 accumulator stays a few MiB.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cpu/int_matmul.hpp"
#include "kernels/cpu/packed_b.hpp"
#include "ops/common/quant_operands.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

struct QuantGemmShape {
  QuantScales q;  // mode, dtypes, x2's scale, int32 bias (x1's scales come per call)
  int64_t k = 0;
  int64_t n = 0;
  WeightLayout b;
  BiasArg bias;                      // float bias, or absent
  DType c_dtype = DType::kBFloat16;  // bfloat16, float16 or float32
  // The most rows one run() gets (0: unknown); bounds the chunk and so the workspace.
  int64_t max_rows = 0;
  // Set by plan_quant_gemm.
  int64_t chunk_rows = 0;
  bool decode_to_bf16 = false;  // FP8/HiF8: oneDNN multiplies bf16 natively here
  // A8W8 with few rows per run (decode) where oneDNN's s8 kernel is not exact (no
  // VNNI/AMX): the direct kernel on the int8 x2 in place, nothing prepared
  // (kernels/cpu/int_matmul.hpp: direct_int8_kernel_pays).
  bool small_m = false;
  // FP8/HiF8 decoded to bf16: the decoded x2 packed once more into the bf16 GEMM's blocked
  // layout (kernels/cpu/packed_b.hpp), for chunks whose plan reads it; unset: read dense.
  std::optional<kernels::cpu::PackedLayout> packed;
  // A8W8 on oneDNN's s8 kernel: x2 packed once per QuantRowGemm into the kernel's blocked
  // layout (int_matmul.hpp: b_packed) where that pays, and then chunks of 1 MiB of int32
  // sums but at least kMinPackedCallRows (256 rows at n = 4096), each dequantized from cache
  // (int_matmul.hpp: int8_packing_pays; never through oneDNN's reorder).
  bool int8_packed = false;
  size_t int8_b_bytes = 0;  // A8W8: x2 as the planned kernel reads it (0: in place)
  // A8W8 with an int8 x2 prepared ahead (b.prepacked, PackedWeight) in the layout the planned
  // chunks read: the GEMMs read it there, nothing is prepared per execute (int8_b_bytes 0).
  bool int8_prepacked = false;
};

// Chooses the chunk and the decoded type (after max_rows is set).
void plan_quant_gemm(QuantGemmShape& s);
size_t quant_gemm_workspace_bytes(const QuantGemmShape& s);
// One line for plan descriptions: the mode, the kernel and its path on this CPU.
std::string describe_quant_gemm(const QuantGemmShape& s);

// x1's scales for a run: one per row (per token), one for all rows, or none (1).
struct RowScales {
  const float* data = nullptr;  // null: 1
  bool per_row = true;
  float at(int64_t i) const { return data == nullptr ? 1.0f : data[per_row ? i : 0]; }
  RowScales from(int64_t row) const {
    return {data != nullptr && per_row ? data + row : data, per_row};
  }
};

class QuantRowGemm {
 public:
  // Prepares x2 (widened or decoded where the kernel needs it), its scale as n floats and
  // the float bias as n floats into workspace (quant_gemm_workspace_bytes(s), 64-aligned).
  QuantRowGemm(const QuantGemmShape& s, void* workspace);

  // c (rows x n, dense, c_dtype) from a (rows x k codes, dense) and its rows' scales.
  // a_copy: when non-null a's codes are copied there verbatim (gather_out).
  void run(const void* a, int64_t rows, RowScales a_scales, void* c, void* a_copy) const;

 private:
  // a_copy (FP8/HiF8 only): where the chunk's codes are copied while they are decoded.
  void chunk(const uint8_t* a, int64_t rows, RowScales a_scales, uint8_t* c, uint8_t* a_copy) const;

  QuantGemmShape s_;
  const void* b_ = nullptr;  // x2 as the kernel reads it
  // A8W8 with x2 packed: the plan it was packed for (a chunk whose plan reads another
  // layout reads the plain x2 instead).
  std::shared_ptr<const kernels::cpu::IntMatmulPlan> packed_for_;
  const void* packed_b_ = nullptr;  // x2 decoded and packed (s_.packed)
  float* b_scale_ = nullptr;
  float* bias32_ = nullptr;  // null: no float bias
  void* acc_ = nullptr;      // chunk_rows x n int32 (A8W8) or fp32
  void* a_dec_ = nullptr;    // FP8/HiF8: chunk_rows x k decoded codes
  float* y_ = nullptr;       // one output row before rounding
};

}  // namespace commfuse::ops
