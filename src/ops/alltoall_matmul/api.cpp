// Public C++ entry points of alltoall_matmul over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/alltoall_matmul/plan.hpp"
#include "ops/common/call_workspace.hpp"
#include "ops/common/plan_impl.hpp"

namespace commfuse {

namespace ops {

void run_schedule(const AlltoAllMatmulPlanData& plan, comm::CommImpl& c, void* ws) {
  switch (plan.schedule) {
    case ops::AlltoAllMatmulSchedule::kFused:
      ops::run_alltoall_matmul_fused(plan, c, ws);
      return;
    case ops::AlltoAllMatmulSchedule::kUnfused:
      ops::run_alltoall_matmul_unfused(plan, c, ws);
      return;
  }
}

}  // namespace ops

AlltoAllMatmulPlan::AlltoAllMatmulPlan(const TensorView& x1, const TensorView& x2,
                                       std::string_view group, const TensorView& output,
                                       const TensorView& all_to_all_out,
                                       const AlltoAllMatmulOptions& options)
    : Plan(ops::make_plan(ops::plan_or_reject(ops::kAlltoAllMatmulOp, group, [&] {
        auto plan = ops::plan_alltoall_matmul_cached(
            ops::validate_alltoall_matmul(x1, x2, group, output, all_to_all_out, options));
        const auto& p = plan.problem;
        plan.signature = ops::call_signature(ops::kAlltoAllMatmulOp,
                                             {{"BS (x1 rows)", p.bs},
                                              {"H (x1 columns)", p.h},
                                              {"N (x2 columns)", p.n},
                                              {"dtype", static_cast<int64_t>(p.dtype), true}},
                                             plan.schedule);
        return plan;
      }))) {}

void alltoall_matmul(const TensorView& x1, const TensorView& x2, std::string_view group,
                     const TensorView& output, const TensorView& all_to_all_out,
                     const AlltoAllMatmulOptions& options) {
  AlltoAllMatmulPlan plan(x1, x2, group, output, all_to_all_out, options);
  ops::execute_once(plan);
}

}  // namespace commfuse
