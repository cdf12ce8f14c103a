// quant_all_reduce planning: schedule and workspace.
#include "ops/quant_all_reduce/plan.hpp"

#include <vector>

#include "core/algorithm.hpp"

namespace commfuse::ops {

const char* schedule_name(QuantAllReduceSchedule s) {
  switch (s) {
    case QuantAllReduceSchedule::kRsAllGather:
      return "fused_rs_all_gather";
    case QuantAllReduceSchedule::kScalesFirst:
      return "fused_scales_first";
    case QuantAllReduceSchedule::kGatherStream:
      return "fused_gather_stream";
    case QuantAllReduceSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

bool rs_all_gather_moves_less(const QuantReduceProblem& p) {
  // Bytes each rank receives per element of the tensor: the one-pass stream wire rows;
  // the two phases (R-1)/R wire rows, then (R-1)/R output elements. With a wire row of
  // unit = H·33/32 bytes: out_bytes·H < (R-1)·unit.
  const auto out_bytes = static_cast<int64_t>(dtype_bits(p.out_dtype) / 8);
  return out_bytes * p.h < (p.world_size - 1) * p.unit();
}

QuantAllReducePlanData plan_quant_all_reduce(QuantReduceProblem problem) {
  QuantAllReducePlanData plan;
  plan.problem = std::move(problem);
  const QuantReduceProblem& p = plan.problem;
  AlgorithmEntry rs_ag{"fused_rs_all_gather", ""};
  if (p.rows % p.world_size != 0)
    rs_ag.not_applicable = detail::cat("rows=", p.rows, " is not a multiple of R=", p.world_size);
  else if (p.transport == "shm" && p.world_size < kRsAllGatherMinRanks)
    rs_ag.not_preferred = detail::cat("fewer than ", kRsAllGatherMinRanks,
                                      " ranks: dequantizing R times costs less than phase two");
  else if (p.transport != "shm" && !rs_all_gather_moves_less(p))
    rs_ag.not_preferred = detail::cat(
        "on ", p.transport, " phase two's ", dtype_name(p.out_dtype),
        " sums make it move more bytes than every rank's quantized rows at R=", p.world_size);
  // Where the stream's pieces travel through shared slots, a row is packed into the slot
  // once either way (the only copy), and the scales' all_gather would only add a
  // synchronization; MPI sends the codes from x, sparing the pack.
  AlgorithmEntry scales_first{"fused_scales_first", ""};
  if (p.transport == "shm")
    scales_first.not_preferred =
        "on shm the rows are packed into the slots once either way; the scales' all_gather "
        "only adds a synchronization";
  const std::vector<AlgorithmEntry> list{
      rs_ag, scales_first, {"fused_gather_stream", ""}, {"unfused", ""}};
  plan.schedule = static_cast<QuantAllReduceSchedule>(choose_algorithm(
      kQuantAllReduceOp, [&] { return describe_problem(kQuantAllReduceOp, p); }, list));
  // The one-pass schedules sum straight into the output, which nothing reads again in the
  // call; fused_rs_all_gather's block is read back by its all_gather, whose copies decide
  // for themselves.
  plan.stream_out = (plan.schedule == QuantAllReduceSchedule::kGatherStream ||
                     plan.schedule == QuantAllReduceSchedule::kScalesFirst) &&
                    stream_output(p, p.rows * p.h);
  const size_t acc = acc_bytes(p, plan.stream_out);  // fp32 accumulator rows, one per thread
  const size_t out_elem = static_cast<size_t>(dtype_bits(p.out_dtype) / 8);
  switch (plan.schedule) {
    case QuantAllReduceSchedule::kRsAllGather: {
      const size_t block = static_cast<size_t>(p.rows / p.world_size * p.h) * out_elem;
      plan.block_bytes = (block + 3) / 4 * 4;  // the accumulator after it stays float-aligned
      plan.workspace_bytes = plan.block_bytes + acc;
      break;
    }
    case QuantAllReduceSchedule::kScalesFirst: {
      const size_t scales =
          static_cast<size_t>(p.world_size) * static_cast<size_t>(p.rows * p.scale_bytes());
      plan.block_bytes = (scales + 63) / 64 * 64;
      plan.workspace_bytes = plan.block_bytes + acc;
      break;
    }
    case QuantAllReduceSchedule::kGatherStream:
      plan.workspace_bytes = acc;
      break;
    case QuantAllReduceSchedule::kUnfused:  // the dequantized rows, then their fp32 sum
      plan.workspace_bytes = 2 * static_cast<size_t>(p.rows * p.h) * sizeof(float);
      break;
  }
  return plan;
}

QuantAllReducePlanData plan_quant_all_reduce_cached(QuantReduceProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<QuantAllReducePlanData>(kQuantAllReduceOp);
  const PlanKey key = plan_key(kQuantAllReduceOp, problem);
  return plan_cached(*cache, key, std::move(problem),
                     [](const QuantReduceProblem& p) { return plan_quant_all_reduce(p); });
}

std::string describe(const QuantAllReducePlanData& plan) {
  return detail::cat(describe_problem(kQuantAllReduceOp, plan.problem), ", schedule ",
                     schedule_name(plan.schedule), ", workspace ", plan.workspace_bytes, " bytes",
                     plan.stream_out ? ", output streamed" : "");
}

}  // namespace commfuse::ops
