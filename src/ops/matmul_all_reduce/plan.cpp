// matmul_all_reduce planning: schedule and workspace.
#include "ops/matmul_all_reduce/plan.hpp"

#include <vector>

#include "core/algorithm.hpp"

namespace commfuse::ops {

const char* schedule_name(MatmulAllReduceSchedule s) {
  switch (s) {
    case MatmulAllReduceSchedule::kFusedRsAllGather:
      return "fused_rs_all_gather";
    case MatmulAllReduceSchedule::kFused:
      return "fused";
    case MatmulAllReduceSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

MatmulAllReducePlanData plan_matmul_all_reduce(MatmulReduceProblem problem) {
  MatmulAllReducePlanData plan;
  plan.problem = std::move(problem);
  const MatmulReduceProblem& p = plan.problem;
  // Two phases sum each row once (by its owner) instead of on every rank, and put the
  // rounded output, not fp32 partials, on the second phase's wire.
  std::string rs_ag;
  if (p.world_size < 2)
    rs_ag = "one rank: nothing to scatter";
  else if (p.m % p.world_size != 0)
    rs_ag = detail::cat("m=", p.m, " is not a multiple of R=", p.world_size);
  // Both fused schedules give way to the unfused one on small partials where nothing
  // overlaps (matmul_reduce.hpp).
  const std::string small =
      small_partial_reason(p, kAllReduceFusedMinPartialBytes, UnfusedSends::kWhole);
  const std::vector<AlgorithmEntry> list{
      {"fused_rs_all_gather", rs_ag, small}, {"fused", "", small}, {"unfused", ""}};
  plan.schedule = static_cast<MatmulAllReduceSchedule>(choose_algorithm(
      kMatmulAllReduceOp, [&] { return describe_problem(kMatmulAllReduceOp, p); }, list));
  plan.workspace_bytes = matmul_reduce_workspace_bytes(p);
  if (plan.schedule == MatmulAllReduceSchedule::kUnfused)  // + the collective's fp32 result
    plan.workspace_bytes += static_cast<size_t>(p.m * p.n) * sizeof(float);
  if (plan.schedule == MatmulAllReduceSchedule::kFusedRsAllGather) {  // + own rounded rows
    plan.own_rows_offset = (plan.workspace_bytes + 63) / 64 * 64;
    plan.workspace_bytes =
        plan.own_rows_offset +
        dtype_storage_bytes(p.out_dtype, static_cast<size_t>(p.m / p.world_size * p.n));
  }
  plan.gemm = partial_product_shape(p);
  return plan;
}

MatmulAllReducePlanData plan_matmul_all_reduce_cached(MatmulReduceProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<MatmulAllReducePlanData>(kMatmulAllReduceOp);
  return cache->get(
      plan_key(kMatmulAllReduceOp, problem), [&] { return plan_matmul_all_reduce(problem); },
      [&](MatmulAllReducePlanData& plan) {
        plan.problem = std::move(problem);
        bind_pointers(plan.gemm, plan.problem);
      });
}

std::string describe(const MatmulAllReducePlanData& plan) {
  return describe_matmul_reduce_plan(kMatmulAllReduceOp, plan.problem, schedule_name(plan.schedule),
                                     plan.workspace_bytes, plan.gemm);
}

}  // namespace commfuse::ops
