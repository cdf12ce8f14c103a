// matmul_all_reduce's rejection rules (SPEC §2).
#include "ops/common/packed_weight.hpp"
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse::ops {

MatmulReduceProblem validate_matmul_all_reduce(const TensorView& x1, const TensorView& x2,
                                               std::string_view group, const TensorView& output,
                                               const MatmulReduceOptions& options) {
  const OpContext ctx(kMatmulAllReduceOp, group);
  const Device device = check_matmul_reduce_devices(ctx, x1, x2, output, options);
  MatmulReduceProblem p = validate_matmul_operands(ctx, x1, x2, options, true);
  check_present(ctx, "output", output);
  check_output_dtype(ctx, "output", output, p.dtype, p.quant);
  if (x1.ndim == 3)
    check_shape(ctx, "output", output, {x1.shape[0], x1.shape[1], p.n}, "(b, s, n)");
  else
    check_shape(ctx, "output", output, {p.m, p.n}, "(m, n)");
  check_contiguous(ctx, "output", output);
  p.output = output.data;
  check_matmul_reduce_disjoint(ctx, x1, x2, output, options);
  p.device = device;
  p.out_dtype = output.dtype;
  p.x2.prepacked = check_packed_x2(ctx, options.packed_x2, x2, p.x2, device);
  return p;
}

}  // namespace commfuse::ops
