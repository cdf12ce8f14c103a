// quant_all_reduce planning: schedule and workspace.
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(QuantAllReduceSchedule s) {
  switch (s) {
    case QuantAllReduceSchedule::kRsAllGather:
      return "fused_rs_all_gather";
    case QuantAllReduceSchedule::kGatherStream:
      return "fused_gather_stream";
  }
  return "?";
}

QuantAllReducePlanData plan_quant_all_reduce(QuantReduceProblem problem) {
  QuantAllReducePlanData plan;
  plan.problem = std::move(problem);
  const QuantReduceProblem& p = plan.problem;
  const size_t acc = acc_bytes(p);  // fp32 accumulator rows, one per thread
  if (p.transport == "shm" && p.world_size >= kRsAllGatherMinRanks && p.rows % p.world_size == 0) {
    plan.schedule = QuantAllReduceSchedule::kRsAllGather;
    const size_t block = static_cast<size_t>(p.rows / p.world_size * p.h) *
                         static_cast<size_t>(dtype_bits(p.out_dtype) / 8);
    plan.block_bytes = (block + 3) / 4 * 4;  // the accumulator after it stays float-aligned
    plan.workspace_bytes = plan.block_bytes + acc;
  } else {
    plan.schedule = QuantAllReduceSchedule::kGatherStream;
    plan.workspace_bytes = acc;
  }
  return plan;
}

}  // namespace commfuse::ops
