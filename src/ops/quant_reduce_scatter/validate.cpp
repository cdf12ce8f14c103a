// quant_reduce_scatter's rejection rules (SPEC §4).
#include "ops/quant_reduce_scatter/plan.hpp"

namespace commfuse::ops {

QuantReduceProblem validate_quant_reduce_scatter(const TensorView& x, const TensorView& scales,
                                                 std::string_view group, std::string_view reduce_op,
                                                 const TensorView& output) {
  const OpContext ctx(kQuantReduceScatterOp, group);
  const Device device = check_devices(ctx, {{"x", &x}, {"scales", &scales}, {"output", &output}});
  QuantReduceProblem p = validate_quant_operands(ctx, x, scales, reduce_op);
  const int64_t R = p.world_size;
  if (p.rows % R != 0)
    ctx.invalid("x has ", p.rows, " rows (BS", x.ndim == 3 ? " = b·s" : "",
                ") but BS must be a multiple of the world size ", R);
  check_quant_output(ctx, output);
  check_shape(ctx, "output", output, {p.rows / R, p.h}, "(BS/R, H)");
  p.out_dtype = output.dtype;
  p.output = output.data;
  check_disjoint(ctx, {{"output", &output}}, {{"x", &x}, {"scales", &scales}});
  p.device = device;
  return p;
}

}  // namespace commfuse::ops
