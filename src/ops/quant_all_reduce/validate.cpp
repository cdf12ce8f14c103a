// quant_all_reduce's rejection rules (SPEC §4).
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse::ops {

QuantReduceProblem validate_quant_all_reduce(const TensorView& x, const TensorView& scales,
                                             std::string_view group, std::string_view reduce_op,
                                             const TensorView& output) {
  const OpContext ctx(kQuantAllReduceOp, group);
  const Device device = check_devices(ctx, {{"x", &x}, {"scales", &scales}, {"output", &output}});
  QuantReduceProblem p = validate_quant_operands(ctx, x, scales, reduce_op);
  check_quant_output(ctx, output);
  if (x.ndim == 3)
    check_shape(ctx, "output", output, {x.shape[0], x.shape[1], p.h}, "(b, s, H), x's shape");
  else
    check_shape(ctx, "output", output, {p.rows, p.h}, "(bs, H), x's shape");
  p.out_dtype = output.dtype;
  p.output = output.data;
  check_disjoint(ctx, {{"output", &output}}, {{"x", &x}, {"scales", &scales}});
  p.device = device;
  return p;
}

}  // namespace commfuse::ops
