// quant_all_reduce planning: schedule and workspace.
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(QuantAllReduceSchedule s) {
  switch (s) {
    case QuantAllReduceSchedule::kGatherStream:
      return "fused_gather_stream";
  }
  return "?";
}

QuantAllReducePlanData plan_quant_all_reduce(QuantReduceProblem problem) {
  QuantAllReducePlanData plan;
  plan.problem = std::move(problem);
  plan.schedule = QuantAllReduceSchedule::kGatherStream;
  // One fp32 accumulator row for float16 / bfloat16 output; float32 output is its own.
  const QuantReduceProblem& p = plan.problem;
  plan.workspace_bytes =
      p.out_dtype == DType::kFloat32 ? 0 : static_cast<size_t>(p.h) * sizeof(float);
  return plan;
}

}  // namespace commfuse::ops
