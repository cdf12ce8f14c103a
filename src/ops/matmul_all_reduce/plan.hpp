// MatmulAllReduce (SPEC §2): validate.cpp (rejection rules), plan.cpp (schedule and
// workspace), schedule_fused.cpp (fp32 partial GEMM per piece straight into the
// transport stream, rank-order sum + bias + one rounding per piece),
// api.cpp (public C++ entry points).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <memory>

#include "comm/call_check.hpp"
#include "ops/common/matmul_reduce.hpp"

namespace commfuse::ops {

inline constexpr const char* kMatmulAllReduceOp = "matmul_all_reduce";

MatmulReduceProblem validate_matmul_all_reduce(const TensorView& x1, const TensorView& x2,
                                               std::string_view group, const TensorView& output,
                                               const MatmulReduceOptions& options);

// Tried in order, first applicable wins. The unfused composition (fp32 GEMM, then the
// collective) is what `commfuse bench` and the demo measure it against.
enum class MatmulAllReduceSchedule {
  // matmul_reduce_scatter's fused schedule for this rank's m/R rows, then an all_gather of
  // the rounded rows: each sum computed once, by its rows' owner (m % R == 0, R >= 2)
  kFusedRsAllGather,
  kFused,    // partial GEMM per piece into the stream, sum + bias + rounding per piece
  kUnfused,  // one fp32 GEMM, the fp32 collective, then bias and rounding
};
const char* schedule_name(MatmulAllReduceSchedule s);

struct MatmulAllReducePlanData {
  comm::CallSignature signature;  // set by the API constructor (api.cpp)
  // The signature's field that execute sets from the call's data (the bias digest,
  // matmul_reduce.hpp); -1: none (no bias).
  int data_field = -1;
  MatmulReduceProblem problem;
  MatmulAllReduceSchedule schedule = MatmulAllReduceSchedule::kFused;
  size_t workspace_bytes = 0;
  size_t own_rows_offset = 0;  // kFusedRsAllGather: this rank's rounded rows
  PartialShape gemm;           // row blocks of the fp32 partial product
};

MatmulAllReducePlanData plan_matmul_all_reduce(MatmulReduceProblem problem);
// The same, from the plan cache when a call with the same descriptor was planned before
// (ops/common/plan_cache.hpp): what the API's plan constructor calls.
MatmulAllReducePlanData plan_matmul_all_reduce_cached(MatmulReduceProblem problem);
// One line: op, shape, schedule, workspace and the partial-product GEMM's kernel.
std::string describe(const MatmulAllReducePlanData& plan);

void run_matmul_all_reduce_rs_all_gather(const MatmulAllReducePlanData& plan, comm::CommImpl& comm,
                                         void* workspace);
void run_matmul_all_reduce_unfused(const MatmulAllReducePlanData& plan, comm::CommImpl& comm,
                                   void* workspace);
void run_matmul_all_reduce_fused(const MatmulAllReducePlanData& plan, comm::CommImpl& comm,
                                 void* workspace);

}  // namespace commfuse::ops
