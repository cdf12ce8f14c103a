// alltoall_quant_matmul's rejection rules (SPEC §3), in the order a reader checks arguments.
#include <string>

#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {
namespace {

bool is_half(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

void check_reserved(const OpContext& ctx, const AlltoAllQuantMatmulOptions& o) {
  if (o.comm_scale && o.comm_scale->present())
    ctx.invalid("commScaleOptional must be null (reserved)");
  if (o.x1_offset && o.x1_offset->present())
    ctx.invalid("x1OffsetOptional must be null (reserved)");
  if (o.x2_offset && o.x2_offset->present())
    ctx.invalid("x2OffsetOptional must be null (reserved)");
  if (o.comm_quant_mode != 0)
    ctx.invalid("commQuantMode is ", o.comm_quant_mode, " but must be 0 (reserved)");
  if (o.comm_quant_dtype != -1)
    ctx.invalid("commQuantDtype is ", o.comm_quant_dtype, " but must be -1 (reserved)");
  if (o.group_size != 0) ctx.invalid("groupSize is ", o.group_size, " but must be 0 (reserved)");
  if (o.transpose_x1) ctx.invalid("transposeX1 is true but x1 may not be transposed");
}

}  // namespace

void check_alltoall_axes(const OpContext& ctx, const std::optional<std::vector<int64_t>>& axes) {
  if (!axes) return;
  if (axes->size() != 2 || (*axes)[0] != -2 || (*axes)[1] != -1) {
    std::string v;
    for (size_t i = 0; i < axes->size(); ++i) v += detail::cat(i ? ", " : "", (*axes)[i]);
    ctx.invalid("alltoAllAxesOptional is [", v, "] but must be null or [-2, -1]");
  }
}

const char* combo_name(QuantCombo c) {
  switch (c) {
    case QuantCombo::kA16W8:
      return "A16W8";
    case QuantCombo::kA16W4:
      return "A16W4";
    case QuantCombo::kA4W4:
      return "A4W4";
  }
  return "?";
}

AlltoAllQuantMatmulProblem validate_alltoall_quant_matmul(
    const TensorView& x1, const TensorView& x2_view, const TensorView& x2_scale,
    std::string_view group, const TensorView& output, const TensorView& all_to_all_out,
    const AlltoAllQuantMatmulOptions& o) {
  // A transposed view of x2 (SPEC §0) is transposeX2 over the buffer it views.
  bool x2_transposed = o.transpose_x2;
  const TensorView x2 = as_dense_x2(x2_view, &x2_transposed);
  const OpContext ctx(kAlltoAllQuantMatmulOp, group);
  const Device device = check_devices(ctx, {{"x1", &x1},
                                            {"x2", &x2},
                                            {"x2_scale", &x2_scale},
                                            {"output", &output},
                                            {"all_to_all_out", &all_to_all_out},
                                            {"bias", given(o.bias)},
                                            {"x1_scale", given(o.x1_scale)},
                                            {"comm_scale", given(o.comm_scale)},
                                            {"x1_offset", given(o.x1_offset)},
                                            {"x2_offset", given(o.x2_offset)}});
  const int R = ctx.world_size();
  check_reserved(ctx, o);
  check_alltoall_axes(ctx, o.all_to_all_axes);

  check_present(ctx, "x1", x1);
  check_present(ctx, "x2", x2);
  check_ndim(ctx, "x1", x1, 2);
  check_ndim(ctx, "x2", x2, 2);

  AlltoAllQuantMatmulProblem p;
  p.group = std::string(group);
  p.rank = ctx.rank();
  p.world_size = R;
  p.x1_dtype = x1.dtype;
  // The combination: dtypes and quant modes together (SPEC §3 table).
  if (is_half(x1.dtype) && x2.dtype == DType::kInt8 && o.x1_quant_mode == 7 && o.x2_quant_mode == 2)
    p.combo = QuantCombo::kA16W8;
  else if (is_half(x1.dtype) && x2.dtype == DType::kInt4 && o.x1_quant_mode == 7 &&
           o.x2_quant_mode == 2)
    p.combo = QuantCombo::kA16W4;
  else if (x1.dtype == DType::kInt4 && x2.dtype == DType::kInt4 && o.x1_quant_mode == 3 &&
           o.x2_quant_mode == 2)
    p.combo = QuantCombo::kA4W4;
  else
    ctx.invalid("unsupported combination x1 ", dtype_name(x1.dtype), ", x2 ", dtype_name(x2.dtype),
                ", x1QuantMode ", o.x1_quant_mode, ", x2QuantMode ", o.x2_quant_mode,
                " (supported: A16W8 = float16/bfloat16, int8, 7, 2; A16W4 = float16/bfloat16, "
                "int4, 7, 2; A4W4 = int4, int4, 3, 2)");

  if (x1.numel() == 0) ctx.invalid("x1 is empty (shape ", shape_str(x1), ")");
  check_contiguous(ctx, "x1", x1);
  p.bs = x1.shape[0];
  p.h = x1.shape[1];
  if (p.bs % R != 0 || p.bs < R)
    ctx.invalid("x1 dim 0 (BS) is ", p.bs, " but must be a positive multiple of the group size ",
                R);
  if (x1.dtype == DType::kInt4 && p.h % 2 != 0)
    ctx.invalid("x1 dim 1 (H) is ", p.h, " but an int4 x1 needs an even H (two per byte)");
  const int64_t k = p.k(), rows = p.rows();

  if (x2.numel() == 0) ctx.invalid("x2 is empty (shape ", shape_str(x2), ")");
  check_contiguous(ctx, "x2", x2);
  p.x2_transposed = x2_transposed;
  const int64_t x2_k = x2_transposed ? x2.shape[1] : x2.shape[0];
  p.n = x2_transposed ? x2.shape[0] : x2.shape[1];
  if (x2_k != k)
    ctx.invalid("x2 dim ", x2_transposed ? 1 : 0, " is ", x2_k, " but must be R*H = ", R, "*", p.h,
                " = ", k, x2_transposed ? " (transposeX2: x2 is (N, R*H))" : "");
  if (x2.dtype == DType::kInt4 && x2.shape[1] % 2 != 0)
    ctx.invalid("x2 dim 1 is ", x2.shape[1], " but an int4 x2 needs an even last dim");
  // The activations are quantized to [-127, 127] (A16W8) or [-7, 7] (A16W4); A4W4 sums each
  // source rank's H rows on their own (one token scale each).
  if (p.combo == QuantCombo::kA16W8)
    check_int32_accumulation(ctx, "R*H", k, 127, 128, "int8 activation x int8 weight");
  else if (p.combo == QuantCombo::kA16W4)
    check_int32_accumulation(ctx, "R*H", k, 7, 8, "int4 activation x int4 weight");
  else
    check_int32_accumulation(ctx, "x1 dim 1 (H)", p.h, 8, 8, "int4 x int4");
  p.x2 = x2.data;
  p.x1 = x1.data;
  if (o.packed_x2 != nullptr) {
    // A4W4 multiplies each source rank's H rows of x2 on their own (one token scale each),
    // a layout per segment that a PackedWeight of the whole (R*H, N) matrix is not.
    if (p.combo == QuantCombo::kA4W4)
      ctx.invalid(
          "packed_x2 with A4W4 is not supported (its GEMMs read x2 per source rank's "
          "H rows; A16W8 and A16W4 take it)");
    p.packed_x2 = check_alltoall_packed_x2(ctx, o.packed_x2, x2, x2_transposed, device);
  }

  check_present(ctx, "x2Scale", x2_scale);
  if (x2_scale.dtype != DType::kFloat32)
    ctx.invalid("x2Scale dtype is ", dtype_name(x2_scale.dtype), " but must be float32");
  if (x2_scale.ndim != 1 || x2_scale.shape[0] != p.n)
    ctx.invalid("x2Scale shape is ", shape_str(x2_scale), " but must be (N,) with N = ", p.n);
  check_contiguous(ctx, "x2Scale", x2_scale);
  p.x2_scale = static_cast<const float*>(x2_scale.data);

  const bool has_x1_scale = o.x1_scale && o.x1_scale->present();
  if (p.combo == QuantCombo::kA4W4) {
    if (!has_x1_scale)
      ctx.reject(Status::kParamNullptr,
                 "x1ScaleOptional is null but A4W4 (x1QuantMode 3) needs the per-token scale");
    const TensorView& s = *o.x1_scale;
    check_present(ctx, "x1ScaleOptional", s);
    if (s.dtype != DType::kFloat32)
      ctx.invalid("x1ScaleOptional dtype is ", dtype_name(s.dtype),
                  " but must be float32 (A4W4 per-token scale)");
    if (s.ndim != 1 || s.shape[0] != p.bs)
      ctx.invalid("x1ScaleOptional shape is ", shape_str(s), " but must be (BS,) with BS = ", p.bs);
    check_contiguous(ctx, "x1ScaleOptional", s);
    p.token_scale = static_cast<const float*>(s.data);
  } else if (has_x1_scale) {
    const TensorView& s = *o.x1_scale;
    check_present(ctx, "x1ScaleOptional", s);
    check_same_dtype(ctx, "x1ScaleOptional", s, "x1", x1.dtype);
    if (s.ndim != 1 || s.shape[0] != k)
      ctx.invalid("x1ScaleOptional shape is ", shape_str(s), " but must be (R*H,) = (", k, ",)");
    check_contiguous(ctx, "x1ScaleOptional", s);
    p.smooth = s.data;
  }

  if (o.bias && o.bias->present()) {
    const TensorView& b = *o.bias;
    check_present(ctx, "bias", b);
    const bool ok = p.combo == QuantCombo::kA4W4
                        ? (is_half(b.dtype) || b.dtype == DType::kFloat32)
                        : (b.dtype == x1.dtype || b.dtype == DType::kFloat32);
    if (!ok)
      ctx.invalid(
          "bias dtype is ", dtype_name(b.dtype), " but must be ",
          p.combo == QuantCombo::kA4W4 ? "float16, bfloat16 or float32" : "x1's dtype or float32");
    check_shape(ctx, "bias", b, {p.n}, "(N,)");
    check_contiguous(ctx, "bias", b);
    p.bias = {b.data, b.dtype};
  }

  check_present(ctx, "output", output);
  if (p.combo == QuantCombo::kA4W4) {
    if (!is_half(output.dtype))
      ctx.invalid("output dtype is ", dtype_name(output.dtype),
                  " but must be float16 or bfloat16 (A4W4)");
  } else {
    check_same_dtype(ctx, "output", output, "x1", x1.dtype);
  }
  check_shape(ctx, "output", output, {rows, p.n}, "(BS/R, N)");
  check_contiguous(ctx, "output", output);
  p.out_dtype = output.dtype;
  p.output = output.data;

  if (all_to_all_out.present()) {
    check_present(ctx, "alltoAllOutOptional", all_to_all_out);
    check_same_dtype(ctx, "alltoAllOutOptional", all_to_all_out, "x1", x1.dtype);
    check_shape(ctx, "alltoAllOutOptional", all_to_all_out, {rows, k}, "(BS/R, R*H)");
    check_contiguous(ctx, "alltoAllOutOptional", all_to_all_out);
    p.all_to_all_out = all_to_all_out.data;
  }
  check_disjoint(ctx, {{"output", &output}, {"alltoAllOutOptional", &all_to_all_out}},
                 {{"x1", &x1},
                  {"x2", &x2},
                  {"x2Scale", &x2_scale},
                  {"bias", given(o.bias)},
                  {"x1ScaleOptional", given(o.x1_scale)},
                  {"commScaleOptional", given(o.comm_scale)},
                  {"x1OffsetOptional", given(o.x1_offset)},
                  {"x2OffsetOptional", given(o.x2_offset)}});
  p.device = device;
  return p;
}

}  // namespace commfuse::ops
