// alltoall_matmul planning: the algorithm, and a home for the permuted rows when
// alltoAllOut is absent (unfused: also for the all_to_all's receive buffer).
#include "ops/alltoall_matmul/plan.hpp"

#include <vector>

#include "core/algorithm.hpp"

namespace commfuse::ops {

const char* schedule_name(AlltoAllMatmulSchedule s) {
  switch (s) {
    case AlltoAllMatmulSchedule::kFused:
      return "fused";
    case AlltoAllMatmulSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

namespace {

std::string describe_problem(const AlltoAllMatmulProblem& p) {
  return detail::cat(kAlltoAllMatmulOp, "(rank ", p.rank, ") BS=", p.bs, " H=", p.h, " N=", p.n,
                     " R=", p.world_size, " ", dtype_name(p.dtype));
}

}  // namespace

AlltoAllMatmulPlanData plan_alltoall_matmul(AlltoAllMatmulProblem problem) {
  AlltoAllMatmulPlanData plan;
  plan.problem = std::move(problem);
  const AlltoAllMatmulProblem& p = plan.problem;
  const std::vector<AlgorithmEntry> list{{"fused", ""}, {"unfused", ""}};
  plan.schedule = static_cast<AlltoAllMatmulSchedule>(choose_algorithm(
      kAlltoAllMatmulOp, [&] { return describe_problem(p); }, list));
  const size_t rows_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.rows() * p.k()));
  const bool unfused = plan.schedule == AlltoAllMatmulSchedule::kUnfused;
  plan.perm_offset = unfused ? (rows_bytes + 63) / 64 * 64 : 0;
  if (p.all_to_all_out == nullptr)
    plan.workspace_bytes = plan.perm_offset + rows_bytes;
  else if (unfused)
    plan.workspace_bytes = rows_bytes;
  return plan;
}

namespace {

PlanKey plan_key(const AlltoAllMatmulProblem& p) {
  PlanKey key(kAlltoAllMatmulOp, p.group);
  key.add(p.rank).add(p.world_size).add(static_cast<int64_t>(p.dtype)).add(p.bs).add(p.h);
  key.add(p.n).add(p.x2_transposed ? 1 : 0).add(p.bias).add(p.all_to_all_out != nullptr ? 1 : 0);
  return key;
}

}  // namespace

AlltoAllMatmulPlanData plan_alltoall_matmul_cached(AlltoAllMatmulProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<AlltoAllMatmulPlanData>(kAlltoAllMatmulOp);
  const PlanKey key = plan_key(problem);
  return plan_cached(*cache, key, std::move(problem),
                     [](const AlltoAllMatmulProblem& p) { return plan_alltoall_matmul(p); });
}

std::string describe(const AlltoAllMatmulPlanData& plan) {
  return detail::cat(describe_problem(plan.problem), ", schedule ", schedule_name(plan.schedule),
                     ", workspace ", plan.workspace_bytes, " bytes");
}

}  // namespace commfuse::ops
