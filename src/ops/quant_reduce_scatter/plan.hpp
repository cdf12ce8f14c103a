// QuantReduceScatter (SPEC §4): validate.cpp (rejection rules), plan.cpp (schedule and
// workspace), schedule_all_to_all_stream.cpp (the fused one-pass schedule),
// schedule_unfused.cpp (the reference), api.cpp (public C++ entry points; the C API is
// src/api/c_api_quant.cpp).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>

#include "comm/call_check.hpp"
#include "ops/common/quant_reduce.hpp"

namespace commfuse::ops {

inline constexpr const char* kQuantReduceScatterOp = "quant_reduce_scatter";

QuantReduceProblem validate_quant_reduce_scatter(const TensorView& x, const TensorView& scales,
                                                 std::string_view group, std::string_view reduce_op,
                                                 const TensorView& output);

// The algorithm list (core/algorithm.hpp), best first, the unfused composition last.
enum class QuantReduceScatterSchedule {
  kAllToAllStream,  // each rank reads every rank's rows of its own block and sums them
  kUnfused,         // dequantize to fp32, fp32 reduce_scatter, round: the reference
};
const char* schedule_name(QuantReduceScatterSchedule s);

struct QuantReduceScatterPlanData {
  comm::CallSignature signature;  // set by the API constructor (api.cpp)
  QuantReduceProblem problem;
  QuantReduceScatterSchedule schedule = QuantReduceScatterSchedule::kAllToAllStream;
  size_t workspace_bytes = 0;
  bool stream_out = false;  // the float32 output streamed (SumScratch::stream)
};

QuantReduceScatterPlanData plan_quant_reduce_scatter(QuantReduceProblem problem);
// One line: the problem, schedule and workspace.
std::string describe(const QuantReduceScatterPlanData& plan);
// The same, from the plan cache when a call with the same descriptor was planned before
// (ops/common/plan_cache.hpp): what the API's plan constructor calls.
QuantReduceScatterPlanData plan_quant_reduce_scatter_cached(QuantReduceProblem problem);

void run_quant_reduce_scatter_all_to_all_stream(const QuantReduceScatterPlanData& plan,
                                                comm::CommImpl& comm, void* workspace);
void run_quant_reduce_scatter_unfused(const QuantReduceScatterPlanData& plan, comm::CommImpl& comm,
                                      void* workspace);

}  // namespace commfuse::ops
