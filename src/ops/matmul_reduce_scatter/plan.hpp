// MatmulReduceScatter (SPEC §2): validate.cpp (rejection rules), plan.cpp (schedule and
// workspace), schedule_fused.cpp (fp32 partial GEMM per piece straight into the
// transport stream, rank-order sum + bias + one rounding per piece), api.cpp (public C++ entry
// points).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <memory>

#include "comm/call_check.hpp"
#include "ops/common/matmul_reduce.hpp"

namespace commfuse::ops {

inline constexpr const char* kMatmulReduceScatterOp = "matmul_reduce_scatter";

MatmulReduceProblem validate_matmul_reduce_scatter(const TensorView& x1, const TensorView& x2,
                                                   std::string_view group, int world_size,
                                                   const TensorView& output,
                                                   const MatmulReduceOptions& options);

// Tried in order, first applicable wins. The unfused composition (fp32 GEMM, then the
// collective) is what `commfuse bench` and the demo measure it against.
enum class MatmulReduceScatterSchedule {
  kFused,    // partial GEMM per piece into the stream, sum + bias + rounding per piece
  kUnfused,  // one fp32 GEMM, the fp32 collective, then bias and rounding
};
const char* schedule_name(MatmulReduceScatterSchedule s);

struct MatmulReduceScatterPlanData {
  comm::CallSignature signature;  // set by the API constructor (api.cpp)
  // The signature's field that execute sets from the call's data (the bias digest,
  // matmul_reduce.hpp); -1: none (no bias).
  int data_field = -1;
  MatmulReduceProblem problem;
  MatmulReduceScatterSchedule schedule = MatmulReduceScatterSchedule::kFused;
  size_t workspace_bytes = 0;
  PartialShape gemm;  // row blocks of the fp32 partial product
};

MatmulReduceScatterPlanData plan_matmul_reduce_scatter(MatmulReduceProblem problem);
// The same, from the plan cache when a call with the same descriptor was planned before
// (ops/common/plan_cache.hpp): what the API's plan constructor calls.
MatmulReduceScatterPlanData plan_matmul_reduce_scatter_cached(MatmulReduceProblem problem);
// One line: op, shape, schedule, workspace and the partial-product GEMM's kernel.
std::string describe(const MatmulReduceScatterPlanData& plan);

void run_matmul_reduce_scatter_unfused(const MatmulReduceScatterPlanData& plan,
                                       comm::CommImpl& comm, void* workspace);
void run_matmul_reduce_scatter_fused(const MatmulReduceScatterPlanData& plan, comm::CommImpl& comm,
                                     void* workspace);

}  // namespace commfuse::ops
