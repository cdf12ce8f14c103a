// quant_reduce_scatter planning: schedule and workspace.
#include "ops/quant_reduce_scatter/plan.hpp"

#include <vector>

#include "core/algorithm.hpp"

namespace commfuse::ops {

const char* schedule_name(QuantReduceScatterSchedule s) {
  switch (s) {
    case QuantReduceScatterSchedule::kAllToAllStream:
      return "fused_all_to_all_stream";
    case QuantReduceScatterSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

QuantReduceScatterPlanData plan_quant_reduce_scatter(QuantReduceProblem problem) {
  QuantReduceScatterPlanData plan;
  plan.problem = std::move(problem);
  const QuantReduceProblem& p = plan.problem;
  plan.stream_out = stream_output(p, p.rows / p.world_size * p.h);
  // Both apply to every valid descriptor (validate requires rows % R == 0).
  const std::vector<AlgorithmEntry> list{{"fused_all_to_all_stream", ""}, {"unfused", ""}};
  plan.schedule = static_cast<QuantReduceScatterSchedule>(choose_algorithm(
      kQuantReduceScatterOp, [&] { return describe_problem(kQuantReduceScatterOp, p); }, list));
  switch (plan.schedule) {
    case QuantReduceScatterSchedule::kAllToAllStream:
      // fp32 accumulator rows (one per thread) for float16 / bfloat16 output and streamed
      // float32 output; float32 output is otherwise its own accumulator.
      plan.workspace_bytes = acc_bytes(p, plan.stream_out);
      break;
    case QuantReduceScatterSchedule::kUnfused:  // all rows dequantized, then this rank's sum
      plan.workspace_bytes =
          static_cast<size_t>(p.rows * p.h + p.rows / p.world_size * p.h) * sizeof(float);
      break;
  }
  return plan;
}

QuantReduceScatterPlanData plan_quant_reduce_scatter_cached(QuantReduceProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<QuantReduceScatterPlanData>(kQuantReduceScatterOp);
  const PlanKey key = plan_key(kQuantReduceScatterOp, problem);
  return plan_cached(*cache, key, std::move(problem),
                     [](const QuantReduceProblem& p) { return plan_quant_reduce_scatter(p); });
}

std::string describe(const QuantReduceScatterPlanData& plan) {
  return detail::cat(describe_problem(kQuantReduceScatterOp, plan.problem), ", schedule ",
                     schedule_name(plan.schedule), ", workspace ", plan.workspace_bytes, " bytes",
                     plan.stream_out ? ", output streamed" : "");
}

}  // namespace commfuse::ops
