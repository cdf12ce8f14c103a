// QuantAllReduce (SPEC §4): validate.cpp (rejection rules), plan.cpp (schedule and
// workspace), schedule_rs_all_gather.cpp, schedule_scales_first.cpp and
// schedule_gather_stream.cpp (the fused schedules), schedule_unfused.cpp (the reference), api.cpp
// (public C++ entry points; the C API is src/api/c_api_quant.cpp).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>

#include "comm/call_check.hpp"
#include "ops/common/quant_reduce.hpp"

namespace commfuse::ops {

inline constexpr const char* kQuantAllReduceOp = "quant_all_reduce";

QuantReduceProblem validate_quant_all_reduce(const TensorView& x, const TensorView& scales,
                                             std::string_view group, std::string_view reduce_op,
                                             const TensorView& output);

// The algorithm list (core/algorithm.hpp), best first, the unfused composition last.
enum class QuantAllReduceSchedule {
  kRsAllGather,   // rows % R == 0 (preferred on shm from kRsAllGatherMinRanks, elsewhere
                  // where it moves fewer bytes): own block, then all_gather of the rounded
                  // rows
  kScalesFirst,   // preferred where the transport sends from x in place (MPI): the scales
                  // all_gathered first, then the codes streamed from x, summed as below
  kGatherStream,  // every rank reads every rank's quantized rows and sums them (one pass)
  kUnfused,       // dequantize to fp32, fp32 all_reduce, round: the reference
};
// From this many ranks on shm, dequantizing each element R times (one pass) costs more than
// the second phase's copy (measured on 2 cores: README "QuantAllReduce benchmark").
inline constexpr int kRsAllGatherMinRanks = 4;
// Off shm the wire decides: whether the two phases (a block of quantized rows from each
// peer, then the peers' rounded blocks in the output dtype) receive fewer bytes than the
// one-pass streams (every peer's quantized rows). Also the fewer dequantizations (N, not
// R·N). Measured W = 8 over TCP, float32 out: 1.53-1.67x MPI_Allreduce where the one-pass
// stream took 0.74-0.89x; W = 4, bfloat16 out: 1.3-1.4x faster than one pass.
bool rs_all_gather_moves_less(const QuantReduceProblem& p);
const char* schedule_name(QuantAllReduceSchedule s);

struct QuantAllReducePlanData {
  comm::CallSignature signature;  // set by the API constructor (api.cpp)
  QuantReduceProblem problem;
  QuantAllReduceSchedule schedule = QuantAllReduceSchedule::kGatherStream;
  size_t workspace_bytes = 0;
  // First in the workspace: kRsAllGather, this rank's rounded block; kScalesFirst, every
  // rank's scales. Its size, rounded up so that the fp32 accumulator after it stays aligned.
  size_t block_bytes = 0;
  // The float32 output streamed out of the accumulator rows (SumScratch::stream): the
  // one-pass schedules, from the non-temporal size.
  bool stream_out = false;
};

QuantAllReducePlanData plan_quant_all_reduce(QuantReduceProblem problem);
// One line: the problem, schedule and workspace.
std::string describe(const QuantAllReducePlanData& plan);
// The same, from the plan cache when a call with the same descriptor was planned before
// (ops/common/plan_cache.hpp): what the API's plan constructor calls.
QuantAllReducePlanData plan_quant_all_reduce_cached(QuantReduceProblem problem);

void run_quant_all_reduce_rs_all_gather(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                        void* workspace);
void run_quant_all_reduce_unfused(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                  void* workspace);
void run_quant_all_reduce_scales_first(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                       void* workspace);
void run_quant_all_reduce_gather_stream(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                        void* workspace);

}  // namespace commfuse::ops
