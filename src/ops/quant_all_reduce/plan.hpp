// QuantAllReduce (SPEC §4): validate.cpp (rejection rules), plan.cpp (schedule and
// workspace), schedule_gather_stream.cpp (the fused one-pass schedule), api.cpp (public
// C++ entry points; the C API is src/api/c_api_quant.cpp).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>

#include "ops/common/quant_reduce.hpp"

namespace commfuse::ops {

inline constexpr const char* kQuantAllReduceOp = "quant_all_reduce";

QuantReduceProblem validate_quant_all_reduce(const TensorView& x, const TensorView& scales,
                                             std::string_view group, std::string_view reduce_op,
                                             const TensorView& output);

// Tried in order, first applicable wins.
enum class QuantAllReduceSchedule {
  kGatherStream,  // every rank reads every rank's quantized rows and sums them (one pass)
};
const char* schedule_name(QuantAllReduceSchedule s);

struct QuantAllReducePlanData {
  QuantReduceProblem problem;
  QuantAllReduceSchedule schedule = QuantAllReduceSchedule::kGatherStream;
  size_t workspace_bytes = 0;
};

QuantAllReducePlanData plan_quant_all_reduce(QuantReduceProblem problem);

void run_quant_all_reduce_gather_stream(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                        void* workspace);

}  // namespace commfuse::ops
