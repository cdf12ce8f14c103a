// Public C++ entry points of alltoall_matmul over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "ops/alltoall_matmul/plan.hpp"
#include "ops/common/call_workspace.hpp"

namespace commfuse {

AlltoAllMatmulPlan::AlltoAllMatmulPlan(const TensorView& x1, const TensorView& x2,
                                       std::string_view group, const TensorView& output,
                                       const TensorView& all_to_all_out,
                                       const AlltoAllMatmulOptions& options)
    : data_(std::make_unique<ops::AlltoAllMatmulPlanData>(
          ops::plan_or_reject(ops::kAlltoAllMatmulOp, group, [&] {
            return ops::plan_alltoall_matmul_cached(
                ops::validate_alltoall_matmul(x1, x2, group, output, all_to_all_out, options));
          }))) {
  const auto& p = data_->problem;
  data_->signature = ops::call_signature(ops::kAlltoAllMatmulOp,
                                         {{"BS (x1 rows)", p.bs},
                                          {"H (x1 columns)", p.h},
                                          {"N (x2 columns)", p.n},
                                          {"dtype", static_cast<int64_t>(p.dtype), true}},
                                         data_->schedule);
}

AlltoAllMatmulPlan::~AlltoAllMatmulPlan() = default;
AlltoAllMatmulPlan::AlltoAllMatmulPlan(AlltoAllMatmulPlan&&) noexcept = default;
AlltoAllMatmulPlan& AlltoAllMatmulPlan::operator=(AlltoAllMatmulPlan&&) noexcept = default;

size_t AlltoAllMatmulPlan::workspace_size() const {
  return ops::workspace_request(data_->workspace_bytes);
}

const char* AlltoAllMatmulPlan::schedule_name() const {
  return ops::schedule_name(data_->schedule);
}

void AlltoAllMatmulPlan::execute(void* workspace, size_t workspace_bytes) {
  const ops::AlltoAllMatmulProblem& p = data_->problem;
  const auto [c, ws] = ops::begin_execute(ops::kAlltoAllMatmulOp, p.group, p.rank, p.world_size,
                                          workspace, workspace_bytes, data_->workspace_bytes);
  const comm::CallScope call(data_->signature);
  switch (data_->schedule) {
    case ops::AlltoAllMatmulSchedule::kFused:
      ops::run_alltoall_matmul_fused(*data_, c, ws);
      return;
    case ops::AlltoAllMatmulSchedule::kUnfused:
      ops::run_alltoall_matmul_unfused(*data_, c, ws);
      return;
  }
}

void alltoall_matmul(const TensorView& x1, const TensorView& x2, std::string_view group,
                     const TensorView& output, const TensorView& all_to_all_out,
                     const AlltoAllMatmulOptions& options) {
  AlltoAllMatmulPlan plan(x1, x2, group, output, all_to_all_out, options);
  const ops::CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse
