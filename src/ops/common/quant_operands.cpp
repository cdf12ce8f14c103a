#include "ops/common/quant_operands.hpp"

#include <cstdint>

namespace commfuse::ops {
namespace {

bool is_fp8(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

bool is_float(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32;
}

// A 1-D (len,) tensor, or 2-D (rows, cols) where allowed; returns its element count.
bool shape_is(const TensorView& t, std::initializer_list<int64_t> want) {
  if (t.ndim != static_cast<int>(want.size())) return false;
  int i = 0;
  for (int64_t w : want)
    if (t.shape[i++] != w) return false;
  return true;
}

// fp32, contiguous; int64 is CANN's pre-packed scale (a format of its own chips).
void check_scale_tensor(const OpContext& ctx, const char* name, const TensorView& s) {
  check_present(ctx, name, s);
  if (s.dtype == DType::kInt64)
    ctx.invalid(name,
                " dtype int64 (CANN's pre-packed scale format) is not supported; pass "
                "float32 scales");
  if (s.dtype != DType::kFloat32)
    ctx.invalid(name, " dtype is ", dtype_name(s.dtype), " but must be float32");
  check_contiguous(ctx, name, s);
}

}  // namespace

const char* quant_matmul_mode_name(QuantMatmulMode m) {
  switch (m) {
    case QuantMatmulMode::kNone:
      return "none";
    case QuantMatmulMode::kA8W8:
      return "A8W8";
    case QuantMatmulMode::kFp8:
      return "FP8";
    case QuantMatmulMode::kHiF8:
      return "HiF8";
  }
  return "?";
}

QuantMatmulMode quant_matmul_mode(DType x1_dtype) {
  if (x1_dtype == DType::kInt8) return QuantMatmulMode::kA8W8;
  if (is_fp8(x1_dtype)) return QuantMatmulMode::kFp8;
  if (x1_dtype == DType::kHiFloat8) return QuantMatmulMode::kHiF8;
  return QuantMatmulMode::kNone;
}

void check_matmul_x1_dtype(const OpContext& ctx, const TensorView& x1) {
  if (!is_float(x1.dtype) && quant_matmul_mode(x1.dtype) == QuantMatmulMode::kNone)
    ctx.invalid("x1 dtype is ", dtype_name(x1.dtype),
                " but must be float16, bfloat16, float32, or a quantized dtype (int8, "
                "float8_e4m3fn, float8_e5m2, hifloat8)");
}

void check_matmul_x2_dtype(const OpContext& ctx, const TensorView& x2, DType x1_dtype) {
  switch (quant_matmul_mode(x1_dtype)) {
    case QuantMatmulMode::kNone:
      check_same_dtype(ctx, "x2", x2, "x1", x1_dtype);
      return;
    case QuantMatmulMode::kFp8:
      if (!is_fp8(x2.dtype))
        ctx.invalid("x2 dtype is ", dtype_name(x2.dtype), " but x1 is ", dtype_name(x1_dtype),
                    " (FP8 mode: x2 must be float8_e4m3fn or float8_e5m2)");
      return;
    case QuantMatmulMode::kA8W8:
    case QuantMatmulMode::kHiF8:
      if (x2.dtype != x1_dtype)
        ctx.invalid("x2 dtype is ", dtype_name(x2.dtype), " but x1 is ", dtype_name(x1_dtype), " (",
                    quant_matmul_mode_name(quant_matmul_mode(x1_dtype)), " mode: x2 must be ",
                    dtype_name(x1_dtype), " too)");
      return;
  }
}

QuantScales check_quant_scales(const OpContext& ctx, DType x1_dtype, DType x2_dtype, int64_t m,
                               int64_t n, const std::optional<TensorView>& x1_scale,
                               const std::optional<TensorView>& x2_scale) {
  QuantScales q;
  q.mode = quant_matmul_mode(x1_dtype);
  const bool has1 = x1_scale && x1_scale->present();
  const bool has2 = x2_scale && x2_scale->present();
  if (!q.quantized()) {
    if (has1)
      ctx.invalid("x1_scale is given but x1 is ", dtype_name(x1_dtype),
                  " (scales apply only to quantized x1: int8, float8_e4m3fn, float8_e5m2, "
                  "hifloat8)");
    if (has2)
      ctx.invalid("x2_scale is given but x1 is ", dtype_name(x1_dtype),
                  " (scales apply only to quantized x1: int8, float8_e4m3fn, float8_e5m2, "
                  "hifloat8)");
    return q;
  }
  q.a_dtype = x1_dtype;
  q.b_dtype = x2_dtype;
  const bool a8w8 = q.mode == QuantMatmulMode::kA8W8;
  if (!has2)  // PARAM_INVALID, not NULLPTR: SPEC §6 lists it with the argument errors
    ctx.invalid("x2_scale is required for quantized x1 (", dtype_name(x1_dtype), ", ",
                quant_matmul_mode_name(q.mode), " mode)");
  const TensorView& s2 = *x2_scale;
  check_scale_tensor(ctx, "x2_scale", s2);
  if (shape_is(s2, {1})) {
    q.x2_per_channel = false;
  } else if (shape_is(s2, {n}) || (a8w8 && shape_is(s2, {1, n}))) {
    q.x2_per_channel = true;
  } else {
    ctx.invalid("x2_scale shape is ", shape_str(s2), " but must be (1,) or (", n, ",)",
                a8w8 ? detail::cat(" or (1, ", n, ")") : std::string(),
                " (per tensor or per output channel n)");
  }
  q.x2_scale = static_cast<const float*>(s2.data);
  if (has1) {
    const TensorView& s1 = *x1_scale;
    check_scale_tensor(ctx, "x1_scale", s1);
    if (shape_is(s1, {1})) {
      q.x1_per_token = false;
    } else if (a8w8 && (shape_is(s1, {m}) || shape_is(s1, {m, 1}))) {
      q.x1_per_token = true;
    } else if (a8w8) {
      ctx.invalid("x1_scale shape is ", shape_str(s1), " but must be (1,), (", m, ",) or (", m,
                  ", 1) (per tensor or per token of x1's m rows)");
    } else {
      ctx.invalid("x1_scale shape is ", shape_str(s1), " but must be (1,) (",
                  quant_matmul_mode_name(q.mode), " mode: one scale per tensor)");
    }
    q.x1_scale = static_cast<const float*>(s1.data);
  }
  return q;
}

void check_int32_accumulation(const OpContext& ctx, const char* what, int64_t k, int64_t a_max,
                              int64_t b_max, const char* operands) {
  const int64_t limit = INT32_MAX / (a_max * b_max);
  if (k > limit)
    ctx.invalid(what, " is ", k, " but ", operands, " products (up to ", a_max, " x ", b_max,
                ") sum exactly in int32 only up to ", limit,
                " of them; a longer sum could wrap (not supported)");
}

BiasArg check_matmul_bias(const OpContext& ctx, const std::optional<TensorView>& bias,
                          DType x1_dtype, int64_t n, QuantScales& q, bool allow_int32) {
  if (!q.quantized()) return check_bias(ctx, bias, x1_dtype, n);
  if (!bias || !bias->present()) return {};
  const TensorView& b = *bias;
  check_present(ctx, "bias", b);
  if (b.dtype == DType::kInt32) {
    if (!allow_int32 || q.mode != QuantMatmulMode::kA8W8)
      ctx.invalid("bias dtype int32 is accepted only by A8W8 all_gather_matmul (x1 is ",
                  dtype_name(x1_dtype), "); pass a float32, bfloat16 or float16 bias");
  } else if (!is_float(b.dtype)) {
    ctx.invalid("bias dtype is ", dtype_name(b.dtype), " but must be float32, bfloat16 or float16",
                allow_int32 && q.mode == QuantMatmulMode::kA8W8 ? " (or int32)" : "");
  }
  check_shape(ctx, "bias", b, {n}, "(n,)");
  check_contiguous(ctx, "bias", b);
  if (b.dtype == DType::kInt32) {
    q.bias_int = static_cast<const int32_t*>(b.data);
    return {};
  }
  return {b.data, b.dtype};
}

void check_output_dtype(const OpContext& ctx, const char* name, const TensorView& t, DType x1_dtype,
                        const QuantScales& q) {
  if (!q.quantized()) {
    check_same_dtype(ctx, name, t, "x1", x1_dtype);
    return;
  }
  if (!is_float(t.dtype))
    ctx.invalid(name, " dtype is ", dtype_name(t.dtype),
                " but must be bfloat16, float16 or float32 (output_dtype of quantized x1 ",
                dtype_name(x1_dtype), ")");
}

}  // namespace commfuse::ops
