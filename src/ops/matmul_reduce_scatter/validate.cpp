// matmul_reduce_scatter's rejection rules (SPEC §2).
#include "ops/common/packed_weight.hpp"
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse::ops {

MatmulReduceProblem validate_matmul_reduce_scatter(const TensorView& x1, const TensorView& x2,
                                                   std::string_view group, int world_size,
                                                   const TensorView& output,
                                                   const MatmulReduceOptions& options) {
  const OpContext ctx(kMatmulReduceScatterOp, group);
  const Device device = check_matmul_reduce_devices(ctx, x1, x2, output, options);
  check_world_size(ctx, world_size);
  MatmulReduceProblem p = validate_matmul_operands(ctx, x1, x2, options, false);
  const int64_t R = p.world_size;
  if (p.m % R != 0)
    ctx.invalid("x1 dim 0 (m) is ", p.m, " but must be a multiple of the world size ", R);
  check_present(ctx, "output", output);
  check_output_dtype(ctx, "output", output, p.dtype, p.quant);
  check_shape(ctx, "output", output, {p.m / R, p.n}, "(m/R, n)");
  check_contiguous(ctx, "output", output);
  p.output = output.data;
  check_matmul_reduce_disjoint(ctx, x1, x2, output, options);
  p.device = device;
  p.out_dtype = output.dtype;
  p.x2.prepacked = check_packed_x2(ctx, options.packed_x2, x2, p.x2, device);
  return p;
}

}  // namespace commfuse::ops
