// AlltoAllMatmul (SPEC §3, the unquantized sibling): the same data movement as
// alltoall_quant_matmul, output = permuted @ x2 + bias in fp16, bf16 or fp32.
//   validate.cpp        rejection rules
//   plan.cpp              algorithm and workspace
//   schedule_fused.cpp    all_to_all_stream assembling permuted rows; chunked GEMM
//   schedule_unfused.cpp  all_to_all, permute, one GEMM: the reference
//   gemm.cpp              the GEMM both schedules call
//   api.cpp             public C++ entry points
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/call_check.hpp"
#include "ops/common/op_context.hpp"
#include "ops/common/plan_cache.hpp"
#include "ops/common/row_gemm.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

inline constexpr const char* kAlltoAllMatmulOp = "alltoall_matmul";

struct AlltoAllMatmulProblem {
  std::string group;
  int rank = 0;
  int world_size = 1;
  DType dtype = DType::kFloat32;
  int64_t bs = 0, h = 0, n = 0;
  const void* x1 = nullptr;
  const void* x2 = nullptr;
  bool x2_transposed = false;
  const PackedWeightImpl* packed_x2 = nullptr;  // options.packed_x2, bound per call; null: none
  BiasArg bias;
  void* output = nullptr;
  void* all_to_all_out = nullptr;  // null: permuted rows live in the workspace
  Device device;  // where every tensor is (cuda: ops/cuda/device_plans.hpp runs the call)

  int64_t rows() const { return bs / world_size; }
  int64_t k() const { return h * world_size; }
};

// The call signature (ops/common/op_context.hpp), for the host and device plans alike.
template <typename Schedule>
comm::CallSignature alltoall_matmul_signature(const char* op, const AlltoAllMatmulProblem& p,
                                              Schedule schedule) {
  return call_signature(op,
                        {{"BS (x1 rows)", p.bs},
                         {"H (x1 columns)", p.h},
                         {"N (x2 columns)", p.n},
                         {"dtype", static_cast<int64_t>(p.dtype), true}},
                        schedule);
}

AlltoAllMatmulProblem validate_alltoall_matmul(const TensorView& x1, const TensorView& x2,
                                               std::string_view group, const TensorView& output,
                                               const TensorView& all_to_all_out,
                                               const AlltoAllMatmulOptions& options);

// The algorithm list (core/algorithm.hpp), best first, the unfused composition last.
enum class AlltoAllMatmulSchedule {
  kFused,    // all_to_all_stream, rows permuted as they arrive, chunked GEMM
  kUnfused,  // all_to_all into the workspace, permute pass, one GEMM
};
const char* schedule_name(AlltoAllMatmulSchedule s);

struct AlltoAllMatmulPlanData {
  comm::CallSignature signature;  // set by the API constructor (api.cpp)
  AlltoAllMatmulProblem problem;
  AlltoAllMatmulSchedule schedule = AlltoAllMatmulSchedule::kFused;
  size_t workspace_bytes = 0;
  // Workspace offsets: the permuted rows (when there is no all_to_all_out); unfused: the
  // all_to_all's receive buffer (rows grouped by source rank) first.
  size_t perm_offset = 0;
  size_t recv_offset = 0;
  // The GEMM both schedules run (RowGemm, as the other matmul ops: x2 packed once per call
  // where this machine's kernel reads it packed, fp16/bf16 widened once where it has no
  // native kernel), planned for the fused schedule's chunks (block_rows: gemm_chunk_rows;
  // unfused: all rows at once), and its workspace at gemm_offset. x2, its packed form and
  // the bias are bound per call (alltoall_matmul_gemm).
  RowGemmShape gemm;
  size_t gemm_offset = 0;
};

AlltoAllMatmulPlanData plan_alltoall_matmul(AlltoAllMatmulProblem problem);
// One line: the problem, schedule and workspace.
std::string describe(const AlltoAllMatmulPlanData& plan);
// The same, from the plan cache when a call with the same descriptor was planned before
// (ops/common/plan_cache.hpp): what the API's plan constructor calls.
AlltoAllMatmulPlanData plan_alltoall_matmul_cached(AlltoAllMatmulProblem problem);
void run_alltoall_matmul_fused(const AlltoAllMatmulPlanData& plan, comm::CommImpl& comm,
                               void* workspace);
void run_alltoall_matmul_unfused(const AlltoAllMatmulPlanData& plan, comm::CommImpl& comm,
                                 void* workspace);
// The plan's GEMM over this call's x2 and bias, its operands prepared in the workspace.
RowGemm alltoall_matmul_gemm(const AlltoAllMatmulPlanData& plan, void* workspace);
// One GEMM: permuted rows [r0, r1) (dense, R*H columns) @ x2 + bias -> their output rows.
void alltoall_matmul_rows(const AlltoAllMatmulProblem& p, const RowGemm& gemm, const void* perm,
                          int64_t r0, int64_t r1);

}  // namespace commfuse::ops
