// AlltoAllMatmul (SPEC §3, the unquantized sibling): the same data movement as
// alltoall_quant_matmul, output = permuted @ x2 + bias in fp16, bf16 or fp32.
//   validate.cpp        rejection rules
//   plan.cpp            workspace
//   schedule_fused.cpp  all_to_all_stream assembling permuted rows; chunked GEMM
//   api.cpp             public C++ entry points
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

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
  BiasArg bias;
  void* output = nullptr;
  void* all_to_all_out = nullptr;  // null: permuted rows live in the workspace

  int64_t rows() const { return bs / world_size; }
  int64_t k() const { return h * world_size; }
};

AlltoAllMatmulProblem validate_alltoall_matmul(const TensorView& x1, const TensorView& x2,
                                               std::string_view group, const TensorView& output,
                                               const TensorView& all_to_all_out,
                                               const AlltoAllMatmulOptions& options);

struct AlltoAllMatmulPlanData {
  AlltoAllMatmulProblem problem;
  size_t workspace_bytes = 0;
};

AlltoAllMatmulPlanData plan_alltoall_matmul(AlltoAllMatmulProblem problem);
void run_alltoall_matmul_fused(const AlltoAllMatmulPlanData& plan, comm::CommImpl& comm,
                               void* workspace);

}  // namespace commfuse::ops
