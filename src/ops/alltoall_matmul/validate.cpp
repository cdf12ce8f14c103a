// alltoall_matmul's rejection rules (SPEC §3).
#include "ops/alltoall_matmul/plan.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {

AlltoAllMatmulProblem validate_alltoall_matmul(const TensorView& x1, const TensorView& x2_view,
                                               std::string_view group, const TensorView& output,
                                               const TensorView& all_to_all_out,
                                               const AlltoAllMatmulOptions& o) {
  // A transposed view of x2 (SPEC §0) is transposeX2 over the buffer it views.
  bool x2_transposed = o.transpose_x2;
  const TensorView x2 = as_dense_x2(x2_view, &x2_transposed);
  const OpContext ctx(kAlltoAllMatmulOp, group);
  const Device device = check_devices(ctx, {{"x1", &x1},
                                            {"x2", &x2},
                                            {"output", &output},
                                            {"all_to_all_out", &all_to_all_out},
                                            {"bias", given(o.bias)}});
  const int R = ctx.world_size();
  if (o.transpose_x1) ctx.invalid("transposeX1 is true but x1 may not be transposed");
  check_alltoall_axes(ctx, o.all_to_all_axes);
  check_present(ctx, "x1", x1);
  check_ndim(ctx, "x1", x1, 2);
  check_float_dtype(ctx, "x1", x1);
  if (x1.numel() == 0) ctx.invalid("x1 is empty (shape ", shape_str(x1), ")");
  check_contiguous(ctx, "x1", x1);
  AlltoAllMatmulProblem p;
  p.group = std::string(group);
  p.rank = ctx.rank();
  p.world_size = R;
  p.dtype = x1.dtype;
  p.bs = x1.shape[0];
  p.h = x1.shape[1];
  if (p.bs % R != 0 || p.bs < R)
    ctx.invalid("x1 dim 0 (BS) is ", p.bs, " but must be a positive multiple of the group size ",
                R);
  const int64_t k = p.k(), rows = p.rows();
  check_present(ctx, "x2", x2);
  check_ndim(ctx, "x2", x2, 2);
  check_same_dtype(ctx, "x2", x2, "x1", p.dtype);
  if (x2.numel() == 0) ctx.invalid("x2 is empty (shape ", shape_str(x2), ")");
  check_contiguous(ctx, "x2", x2);
  p.x2_transposed = x2_transposed;
  const int64_t x2_k = x2_transposed ? x2.shape[1] : x2.shape[0];
  p.n = x2_transposed ? x2.shape[0] : x2.shape[1];
  if (x2_k != k)
    ctx.invalid("x2 dim ", x2_transposed ? 1 : 0, " is ", x2_k, " but must be R*H = ", R, "*", p.h,
                " = ", k, x2_transposed ? " (transposeX2: x2 is (N, R*H))" : "");
  p.x1 = x1.data;
  p.x2 = x2.data;
  p.packed_x2 = check_alltoall_packed_x2(ctx, o.packed_x2, x2, x2_transposed, device);
  p.bias = check_bias(ctx, o.bias, p.dtype, p.n);
  check_present(ctx, "output", output);
  check_same_dtype(ctx, "output", output, "x1", p.dtype);
  check_shape(ctx, "output", output, {rows, p.n}, "(BS/R, N)");
  check_contiguous(ctx, "output", output);
  p.output = output.data;
  if (all_to_all_out.present()) {
    check_present(ctx, "alltoAllOutOptional", all_to_all_out);
    check_same_dtype(ctx, "alltoAllOutOptional", all_to_all_out, "x1", p.dtype);
    check_shape(ctx, "alltoAllOutOptional", all_to_all_out, {rows, k}, "(BS/R, R*H)");
    check_contiguous(ctx, "alltoAllOutOptional", all_to_all_out);
    p.all_to_all_out = all_to_all_out.data;
  }
  check_disjoint(ctx, {{"output", &output}, {"alltoAllOutOptional", &all_to_all_out}},
                 {{"x1", &x1}, {"x2", &x2}, {"bias", given(o.bias)}});
  p.device = device;
  return p;
}

}  // namespace commfuse::ops
