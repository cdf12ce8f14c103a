// AllGatherMatmul (SPEC §2): the validated problem, the plan (problem + chosen schedule +
// workspace) and the schedules. One file per job:
//   validate.cpp          every rejection rule, raised on the calling rank before any
//                         communication
//   plan.cpp              schedule choice and workspace size
//   schedule_fused.cpp    x1's rows streamed to every rank, each block multiplied as it
//                         arrives (any transport; in place from the peers' shm slots)
//   api.cpp               the public C++ entry points
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/call_check.hpp"
#include "ops/common/plan_cache.hpp"
#include "ops/common/quant_operands.hpp"
#include "ops/common/quant_row_gemm.hpp"
#include "ops/common/row_gemm.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

inline constexpr const char* kAllGatherMatmulOp = "all_gather_matmul";

struct AllGatherMatmulProblem {
  std::string group;
  int rank = 0;
  int world_size = 1;
  DType dtype = DType::kFloat32;      // x1 and gather_out (and x2 outside quantized mode)
  DType out_dtype = DType::kFloat32;  // output: dtype, or bf16/fp16/fp32 when quantized
  int64_t m = 0;                      // rows per rank
  int64_t k = 0;
  int64_t n = 0;
  const void* x1 = nullptr;  // (m, k) dense
  WeightLayout x2;
  BiasArg bias;
  QuantScales quant;           // SPEC §6 (mode kNone: the §2 op)
  void* output = nullptr;      // (m·R, n) dense
  void* gather_out = nullptr;  // (m·R, k) dense; null when gather_output is false
  int64_t comm_turn = 0;
  Device device;  // where every tensor is (cuda: ops/cuda/device_plans.hpp runs the call)
};

// Every rule of SPEC §2 for all_gather_matmul; throws on the first violation
// (the API constructor tells the peers: ops::plan_or_reject).
AllGatherMatmulProblem validate_all_gather_matmul(const TensorView& x1, const TensorView& x2,
                                                  std::string_view group, int world_size,
                                                  const TensorView& output,
                                                  const TensorView& gather_out,
                                                  const AllGatherMatmulOptions& options);

// The algorithm list, best first (core/algorithm.hpp); the unfused composition
// (all_gather, then one GEMM) last, as the reference `commfuse bench` and the demo measure
// the op against.
enum class AllGatherMatmulSchedule {
  kFused,    // gather_stream of x1's rows, GEMM per arriving block: any transport
  kUnfused,  // all_gather into gather_out (or the workspace), then one GEMM
};
const char* schedule_name(AllGatherMatmulSchedule s);

struct AllGatherMatmulPlanData {
  comm::CallSignature signature;  // set by the API constructor (api.cpp)
  AllGatherMatmulProblem problem;
  AllGatherMatmulSchedule schedule = AllGatherMatmulSchedule::kFused;
  size_t workspace_bytes = 0;
  RowGemmShape gemm;  // one block of gathered rows @ x2 + bias -> output rows
  // Arriving rows are staged (widened in the same pass) until gemm_rows are ready, then one
  // GEMM runs on them (1: every block is multiplied on arrival). See kCachedX2Bytes.
  int64_t gemm_rows = 0;
  // fused, one GEMM over all rows that are not widened, with gather_out: the rows are staged
  // in gather_out itself (where they must be copied anyway) and multiplied there, so the
  // fused schedule copies no more than the unfused one (no staging area, one copy fewer).
  bool stage_in_gather_out = false;
  // fused: staged rows (gemm_rows), then their output (gemm_rows x n), both unused (0)
  // when stage_in_gather_out; unfused: the gathered rows when there is no gather_out
  size_t staging_offset = 0;
  size_t staged_out_offset = 0;
  // Quantized mode (SPEC §6), instead of gemm: the quantized block product, on every
  // arriving block (fused, gemm_rows 1) or once over all gathered rows (unfused; fused with
  // gemm_rows m·R: the codes staged as they arrive, in gather_out when stage_in_gather_out).
  // Workspace: its prepared x2 at 0, then this rank's m row scales, the gathered m·R row
  // scales, and (one run without gather_out) the gathered codes at staging_offset.
  QuantGemmShape qgemm;
  size_t scales_offset = 0;
  size_t gathered_scales_offset = 0;
};

// How many gathered rows one GEMM call takes (plan.cpp). Each call streams and repacks all of
// x2 (fp32): when that is more than kCachedX2Bytes, calls on a few hundred rows measured
// several % slower in total than one call, so up to kMaxGemmRows rows (all of them at the
// benchmark shapes) are staged — widened in the pass that copies them out of the shared
// slots — and multiplied at once; the copies are the overlap that remains on shm, where the
// same cores move the data and multiply. When x2 stays in cache each arriving block is
// multiplied at once, overlapping the GEMM with the next block's transfer (MPI).
// Blocks of fewer than kMinBlockRows rows per rank are staged even then: each GEMM call has
// a fixed cost (oneDNN's dispatch, a few µs), which R calls of 1-row blocks pay R times for
// nothing (tiny shapes). Not more: with more ranks than cores, multiplying each block as it
// arrives uses the time spent waiting for the slower peers (the demo's 16-row blocks on 8
// ranks measured 0.61x unfused when staged, 1.07x multiplied on arrival).
inline constexpr int64_t kCachedX2Bytes = 2 << 20;
inline constexpr int64_t kMaxGemmRows = 8192;
inline constexpr int64_t kMinBlockRows = 8;
// On shm, the list prefers the fused schedule (its blocks multiplied on arrival where x2
// stays in cache) only without gather_out, for a non-quantized op, and from this many rows
// per rank; else the unfused composition (plan.cpp), the direct kernel's few-row blocks aside.
inline constexpr int64_t kShmMinArrivalRows = 64;
// With at least kCrowdedRanksPerCore ranks per core and rank blocks (m·k·n) under
// kCrowdedMinBlockMacs multiply-adds, the list prefers the unfused composition (plan.cpp).
inline constexpr int kCrowdedRanksPerCore = 4;
inline constexpr int64_t kCrowdedMinBlockMacs = int64_t{4} << 20;

// The most rows of one piece of the fused schedule's stream: a rank's m rows, or with
// comm_turn c > 0 ceil(m / c) (SPEC §2); the transport may cut pieces smaller.
inline int64_t stream_piece_rows(const AllGatherMatmulProblem& p) {
  return p.comm_turn > 0 ? (p.m + p.comm_turn - 1) / p.comm_turn : p.m;
}

AllGatherMatmulPlanData plan_all_gather_matmul(AllGatherMatmulProblem problem);
// The same, from the plan cache when a call with the same descriptor was planned before
// (ops/common/plan_cache.hpp): what the API's plan constructor calls.
AllGatherMatmulPlanData plan_all_gather_matmul_cached(AllGatherMatmulProblem problem);
// One line: op, shape, schedule, GEMM batching, workspace and the block GEMM's kernel (as
// COMMFUSE_VERBOSE prints it and AllGatherMatmulPlan::description() returns it).
std::string describe(const AllGatherMatmulPlanData& plan);

void run_all_gather_matmul_unfused(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                                   void* workspace);
void run_all_gather_matmul_fused(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                                 void* workspace);

// Quantized mode: the row scales of every rank, gathered in rank order into the workspace
// (this rank's expanded to m values first: per token, the per-tensor value, or 1), so that
// gathered row i's scale is the result's [i]. Both schedules start with it.
const float* gather_row_scales(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                               void* workspace);

}  // namespace commfuse::ops
