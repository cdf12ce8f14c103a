// Public C++ entry points of matmul_all_reduce over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "core/log.hpp"
#include "ops/common/call_workspace.hpp"
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse {

MatmulAllReducePlan::MatmulAllReducePlan(const TensorView& x1, const TensorView& x2,
                                         std::string_view group, const TensorView& output,
                                         const MatmulReduceOptions& options)
    : data_(std::make_unique<ops::MatmulAllReducePlanData>(
          ops::plan_or_reject(ops::kMatmulAllReduceOp, group, [&] {
            return ops::plan_matmul_all_reduce_cached(
                ops::validate_matmul_all_reduce(x1, x2, group, output, options));
          }))) {
  data_->signature =
      ops::matmul_signature(ops::kMatmulAllReduceOp, data_->problem, data_->schedule);
  // Built only when printed: describing costs more than a tiny op itself.
  if (log::verbose_level() >= 1) log::verbose(ops::describe(*data_));
}

MatmulAllReducePlan::~MatmulAllReducePlan() = default;
MatmulAllReducePlan::MatmulAllReducePlan(MatmulAllReducePlan&&) noexcept = default;
MatmulAllReducePlan& MatmulAllReducePlan::operator=(MatmulAllReducePlan&&) noexcept = default;

size_t MatmulAllReducePlan::workspace_size() const {
  return ops::workspace_request(data_->workspace_bytes);
}

std::string MatmulAllReducePlan::description() const {
  return ops::describe(*data_);
}

const char* MatmulAllReducePlan::schedule_name() const {
  return ops::schedule_name(data_->schedule);
}

void MatmulAllReducePlan::execute(void* workspace, size_t workspace_bytes) {
  const ops::MatmulReduceProblem& p = data_->problem;
  const auto [c, ws] = ops::begin_execute(ops::kMatmulAllReduceOp, p.group, p.rank, p.world_size,
                                          workspace, workspace_bytes, data_->workspace_bytes);
  const comm::CallScope call(data_->signature);
  switch (data_->schedule) {
    case ops::MatmulAllReduceSchedule::kFusedRsAllGather:
      ops::run_matmul_all_reduce_rs_all_gather(*data_, c, ws);
      return;
    case ops::MatmulAllReduceSchedule::kFused:
      ops::run_matmul_all_reduce_fused(*data_, c, ws);
      return;
    case ops::MatmulAllReduceSchedule::kUnfused:
      ops::run_matmul_all_reduce_unfused(*data_, c, ws);
      return;
  }
}

void matmul_all_reduce(const TensorView& x1, const TensorView& x2, std::string_view group,
                       const TensorView& output, const MatmulReduceOptions& options) {
  MatmulAllReducePlan plan(x1, x2, group, output, options);
  const ops::CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse
