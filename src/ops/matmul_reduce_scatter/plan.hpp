// MatmulReduceScatter (SPEC §2): validate.cpp (rejection rules), plan.cpp (schedule and
// workspace), schedule_unfused.cpp (fp32 GEMM, transport reduce_scatter, bias, one
// rounding), api.cpp (public C++ entry points).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <memory>

#include "ops/common/matmul_reduce.hpp"

namespace commfuse::ops {

inline constexpr const char* kMatmulReduceScatterOp = "matmul_reduce_scatter";

MatmulReduceProblem validate_matmul_reduce_scatter(const TensorView& x1, const TensorView& x2,
                                                   std::string_view group, int world_size,
                                                   const TensorView& output,
                                                   const MatmulReduceOptions& options);

// Tried in order, first applicable wins; the fused schedule goes first when it lands.
enum class MatmulReduceScatterSchedule {
  kUnfused,  // fp32 partial GEMM, transport reduce_scatter, bias + rounding
};
const char* schedule_name(MatmulReduceScatterSchedule s);

struct MatmulReduceScatterPlanData {
  MatmulReduceProblem problem;
  MatmulReduceScatterSchedule schedule = MatmulReduceScatterSchedule::kUnfused;
  size_t workspace_bytes = 0;
  std::shared_ptr<const kernels::cpu::MatmulPlan> gemm;  // null when m == 0
};

MatmulReduceScatterPlanData plan_matmul_reduce_scatter(MatmulReduceProblem problem);

void run_matmul_reduce_scatter_unfused(const MatmulReduceScatterPlanData& plan,
                                       comm::CommImpl& comm, void* workspace);

}  // namespace commfuse::ops
