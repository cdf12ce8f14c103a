// SPEC §6: the quantized mode of the three §2 operators (A8W8, FP8, HiF8), selected by x1's
// dtype, and its rejection rules. One set of rules for all_gather_matmul,
// matmul_reduce_scatter and matmul_all_reduce, so their messages agree.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <optional>

#include "ops/common/op_context.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

enum class QuantMatmulMode { kNone, kA8W8, kFp8, kHiF8 };
const char* quant_matmul_mode_name(QuantMatmulMode m);
// kNone for fp16/bf16/fp32 (and anything else: check_matmul_x1_dtype rejects it).
QuantMatmulMode quant_matmul_mode(DType x1_dtype);

// The validated quantized operands (mode kNone: none of them).
struct QuantScales {
  QuantMatmulMode mode = QuantMatmulMode::kNone;
  DType a_dtype = DType::kFloat32;  // x1's codes
  DType b_dtype = DType::kFloat32;  // x2's codes (FP8: may differ from x1's)
  const float* x1_scale = nullptr;  // null: 1 (absent)
  bool x1_per_token = false;        // m values (one per row), else one per tensor
  const float* x2_scale = nullptr;
  bool x2_per_channel = false;        // n values, else one
  const int32_t* bias_int = nullptr;  // A8W8 all_gather_matmul: added to the int32 sum
  bool quantized() const { return mode != QuantMatmulMode::kNone; }
};

// x1: fp16, bf16, fp32, or a quantized dtype of SPEC §6 (int8, float8_e4m3fn, float8_e5m2,
// hifloat8).
void check_matmul_x1_dtype(const OpContext& ctx, const TensorView& x1);
// x2's dtype for x1's: the same outside quantized mode, else a pair of SPEC §6's table.
void check_matmul_x2_dtype(const OpContext& ctx, const TensorView& x2, DType x1_dtype);

// The scales of SPEC §6 for x1 (m, k) and x2 (k, n): x2_scale required and x1_scale optional
// in quantized mode, both absent otherwise; fp32 (int64 x2_scale: CANN's pre-packed format,
// not supported), of the shapes the mode allows.
QuantScales check_quant_scales(const OpContext& ctx, DType x1_dtype, DType x2_dtype, int64_t m,
                               int64_t n, const std::optional<TensorView>& x1_scale,
                               const std::optional<TensorView>& x2_scale);

// An integer GEMM's int32 sum is exact (SPEC §3, §6: "int32, exact") only while k products
// of the operands' largest magnitudes fit it: k · a_max · b_max <= 2^31 - 1 (A8W8 k <= 131071,
// A16W8 R·H <= 132104). Beyond, every kernel's sum would wrap silently (a sign flip, no
// error): PARAM_INVALID naming `what` (the dimension, e.g. "x1 dim 1 (k)") and the limit.
void check_int32_accumulation(const OpContext& ctx, const char* what, int64_t k, int64_t a_max,
                              int64_t b_max, const char* operands);

// The bias: outside quantized mode check_bias's rule; in it fp32, bf16 or fp16 (n,), or —
// where allow_int32 (A8W8 all_gather_matmul) — int32 (n,), returned in q.bias_int.
BiasArg check_matmul_bias(const OpContext& ctx, const std::optional<TensorView>& bias,
                          DType x1_dtype, int64_t n, QuantScales& q, bool allow_int32);

// An output's dtype: x1's outside quantized mode; bfloat16, float16 or float32 in it.
void check_output_dtype(const OpContext& ctx, const char* name, const TensorView& t, DType x1_dtype,
                        const QuantScales& q);

}  // namespace commfuse::ops
