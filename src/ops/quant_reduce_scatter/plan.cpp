// quant_reduce_scatter planning: schedule and workspace.
#include "ops/quant_reduce_scatter/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(QuantReduceScatterSchedule s) {
  switch (s) {
    case QuantReduceScatterSchedule::kAllToAllStream:
      return "fused_all_to_all_stream";
  }
  return "?";
}

QuantReduceScatterPlanData plan_quant_reduce_scatter(QuantReduceProblem problem) {
  QuantReduceScatterPlanData plan;
  plan.problem = std::move(problem);
  plan.schedule = QuantReduceScatterSchedule::kAllToAllStream;
  // fp32 accumulator rows (one per thread) for float16 / bfloat16 output; float32 output is
  // its own accumulator.
  plan.workspace_bytes = acc_bytes(plan.problem);
  return plan;
}

}  // namespace commfuse::ops
