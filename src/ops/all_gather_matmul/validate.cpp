// all_gather_matmul's rejection rules (SPEC §2), in the order a reader checks arguments.
#include "ops/all_gather_matmul/plan.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {

AllGatherMatmulProblem validate_all_gather_matmul(const TensorView& x1, const TensorView& x2,
                                                  std::string_view group, int world_size,
                                                  const TensorView& output,
                                                  const TensorView& gather_out,
                                                  const AllGatherMatmulOptions& options) {
  const OpContext ctx(kAllGatherMatmulOp, group);
  const Device device = check_devices(ctx, {{"x1", &x1},
                                            {"x2", &x2},
                                            {"output", &output},
                                            {"gather_out", &gather_out},
                                            {"bias", given(options.bias)},
                                            {"x1_scale", given(options.x1_scale)},
                                            {"x2_scale", given(options.x2_scale)}});
  check_world_size(ctx, world_size);
  if (options.gather_index == 1) ctx.invalid("gather_index=1 is not supported (only 0: gather x1)");
  if (options.gather_index != 0)
    ctx.invalid("gather_index is ", options.gather_index, " but must be 0 (gather x1)");
  check_comm_turn(ctx, options.comm_turn);

  check_present(ctx, "x1", x1);
  check_ndim(ctx, "x1", x1, 2);
  check_matmul_x1_dtype(ctx, x1);
  check_contiguous(ctx, "x1", x1);
  AllGatherMatmulProblem p;
  p.group = std::string(group);
  p.rank = ctx.rank();
  p.world_size = ctx.world_size();
  p.dtype = x1.dtype;
  p.m = x1.shape[0];
  p.k = x1.shape[1];
  if (p.k < 1) ctx.invalid("x1 dim 1 (k) is ", p.k, " but must be >= 1");
  p.x1 = x1.data;
  p.x2 = check_x2(ctx, x2, p.dtype, p.k);
  p.n = p.x2.n;
  p.quant =
      check_quant_scales(ctx, p.dtype, x2.dtype, p.m, p.n, options.x1_scale, options.x2_scale);
  if (p.quant.mode == QuantMatmulMode::kA8W8)
    check_int32_accumulation(ctx, "x1 dim 1 (k)", p.k, 128, 128, "int8 x int8");
  p.bias = check_matmul_bias(ctx, options.bias, p.dtype, p.n, p.quant, /*allow_int32=*/true);
  int64_t rows = 0;  // m·R: x1's rows fit an int64, R times them may not
  if (__builtin_mul_overflow(p.m, p.world_size, &rows))
    ctx.invalid("x1 dim 0 (m) is ", p.m, ": the gathered m·R rows (R = ", p.world_size,
                ") exceed int64");
  int64_t gathered = 0;  // m·R·k: the gathered x1 (gather_out, or staged in the workspace)
  if (__builtin_mul_overflow(rows, p.k, &gathered))
    ctx.invalid("x1 is (", p.m, ", ", p.k, "): the gathered m·R·k elements (R = ", p.world_size,
                ") exceed int64");

  check_present(ctx, "output", output);
  check_output_dtype(ctx, "output", output, p.dtype, p.quant);
  check_shape(ctx, "output", output, {rows, p.n}, "(m·R, n)");
  check_contiguous(ctx, "output", output);
  p.output = output.data;
  p.out_dtype = output.dtype;

  if (options.gather_output) {
    check_present(ctx, "gather_out", gather_out);
    check_same_dtype(ctx, "gather_out", gather_out, "x1", p.dtype);
    check_shape(ctx, "gather_out", gather_out, {rows, p.k}, "(m·R, k)");
    check_contiguous(ctx, "gather_out", gather_out);
    p.gather_out = gather_out.data;
  } else if (gather_out.present()) {
    // Absent or the empty (0,) tensor torch returns for gather_output=False.
    check_shape(ctx, "gather_out", gather_out, {0}, "(empty: gather_output is false)");
  }
  // x1 may be this rank's own block of gather_out (the in-place all_gather form), exactly.
  const TensorView* gathered_out = options.gather_output ? &gather_out : nullptr;
  const bool x1_own_block =
      gathered_out != nullptr &&
      static_cast<const uint8_t*>(x1.data) ==
          static_cast<const uint8_t*>(gather_out.data) +
              dtype_storage_bytes(p.dtype, static_cast<size_t>(p.rank * p.m * p.k));
  check_disjoint(ctx, {{"output", &output}, {"gather_out", gathered_out}},
                 {{"x2", &x2},
                  {"bias", given(options.bias)},
                  {"x1_scale", given(options.x1_scale)},
                  {"x2_scale", given(options.x2_scale)}});
  check_disjoint(ctx, {{"output", &output}, {"gather_out", x1_own_block ? nullptr : gathered_out}},
                 {{"x1", &x1}});
  p.comm_turn = options.comm_turn;
  p.device = device;
  p.x2.prepacked = check_packed_x2(ctx, options.packed_x2, x2, p.x2, device);
  return p;
}

}  // namespace commfuse::ops
