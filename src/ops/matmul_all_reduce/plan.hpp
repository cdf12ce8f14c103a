// MatmulAllReduce (SPEC §2): validate.cpp (rejection rules), plan.cpp (schedule and
// workspace), schedule_unfused.cpp (fp32 GEMM, transport all_reduce, bias, one rounding),
// api.cpp (public C++ entry points).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <memory>

#include "ops/common/matmul_reduce.hpp"

namespace commfuse::ops {

inline constexpr const char* kMatmulAllReduceOp = "matmul_all_reduce";

MatmulReduceProblem validate_matmul_all_reduce(const TensorView& x1, const TensorView& x2,
                                               std::string_view group, const TensorView& output,
                                               const MatmulReduceOptions& options);

// Tried in order, first applicable wins; the fused schedule goes first when it lands.
enum class MatmulAllReduceSchedule {
  kUnfused,  // fp32 partial GEMM, transport all_reduce, bias + rounding
};
const char* schedule_name(MatmulAllReduceSchedule s);

struct MatmulAllReducePlanData {
  MatmulReduceProblem problem;
  MatmulAllReduceSchedule schedule = MatmulAllReduceSchedule::kUnfused;
  size_t workspace_bytes = 0;
  std::shared_ptr<const kernels::cpu::MatmulPlan> gemm;  // null when m == 0
};

MatmulAllReducePlanData plan_matmul_all_reduce(MatmulReduceProblem problem);

void run_matmul_all_reduce_unfused(const MatmulAllReducePlanData& plan, comm::CommImpl& comm,
                                   void* workspace);

}  // namespace commfuse::ops
