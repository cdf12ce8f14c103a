// Public C++ entry points of alltoall_quant_matmul over the plan and its schedules.
#include <commfuse/commfuse.hpp>

#include <memory>

#include "core/log.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/common/call_workspace.hpp"

namespace commfuse {

AlltoAllQuantMatmulPlan::AlltoAllQuantMatmulPlan(const TensorView& x1, const TensorView& x2,
                                                 const TensorView& x2_scale, std::string_view group,
                                                 const TensorView& output,
                                                 const TensorView& all_to_all_out,
                                                 const AlltoAllQuantMatmulOptions& options)
    : data_(std::make_unique<ops::AlltoAllQuantMatmulPlanData>(
          ops::plan_or_reject(ops::kAlltoAllQuantMatmulOp, group, [&] {
            return ops::plan_alltoall_quant_matmul_cached(ops::validate_alltoall_quant_matmul(
                x1, x2, x2_scale, group, output, all_to_all_out, options));
          }))) {
  const auto& p = data_->problem;
  data_->signature = ops::call_signature(
      ops::kAlltoAllQuantMatmulOp,
      {{"BS (x1 rows)", p.bs},
       {"H (x1 columns)", p.h},
       {"N (x2 columns)", p.n},
       {"x1 dtype", static_cast<int64_t>(p.x1_dtype), true},
       {"quantization (0 A16W8, 1 A16W4, 2 A4W4)", static_cast<int64_t>(p.combo)}},
      data_->schedule);
  // Built only when printed: describing costs more than a tiny op itself.
  if (log::verbose_level() >= 1) log::verbose(ops::describe(*data_));
}

AlltoAllQuantMatmulPlan::~AlltoAllQuantMatmulPlan() = default;
AlltoAllQuantMatmulPlan::AlltoAllQuantMatmulPlan(AlltoAllQuantMatmulPlan&&) noexcept = default;
AlltoAllQuantMatmulPlan& AlltoAllQuantMatmulPlan::operator=(AlltoAllQuantMatmulPlan&&) noexcept =
    default;

size_t AlltoAllQuantMatmulPlan::workspace_size() const {
  return ops::workspace_request(data_->ws.total);
}

std::string AlltoAllQuantMatmulPlan::description() const {
  return ops::describe(*data_);
}

const char* AlltoAllQuantMatmulPlan::schedule_name() const {
  // The algorithm's name, then the int GEMM's path (the part a benchmark reader asks about).
  const bool s8 = data_->path == kernels::cpu::IntMatmulPath::kS8;
  if (data_->schedule == ops::AlltoAllQuantMatmulSchedule::kUnfused)
    return s8 ? "unfused (int GEMM: oneDNN s8s8s32)" : "unfused (int GEMM: exact f32 blocks)";
  return s8 ? "fused (int GEMM: oneDNN s8s8s32)" : "fused (int GEMM: exact f32 blocks)";
}

const char* AlltoAllQuantMatmulPlan::combination_name() const {
  return ops::combo_name(data_->problem.combo);
}

void AlltoAllQuantMatmulPlan::execute(void* workspace, size_t workspace_bytes) {
  const ops::AlltoAllQuantMatmulProblem& p = data_->problem;
  const auto [c, ws] =
      ops::begin_execute(ops::kAlltoAllQuantMatmulOp, p.group, p.rank, p.world_size, workspace,
                         workspace_bytes, data_->ws.total);
  const comm::CallScope call(data_->signature);
  switch (data_->schedule) {
    case ops::AlltoAllQuantMatmulSchedule::kFused:
      ops::run_alltoall_quant_matmul_fused(*data_, c, ws);
      return;
    case ops::AlltoAllQuantMatmulSchedule::kUnfused:
      ops::run_alltoall_quant_matmul_unfused(*data_, c, ws);
      return;
  }
}

void alltoall_quant_matmul(const TensorView& x1, const TensorView& x2, const TensorView& x2_scale,
                           std::string_view group, const TensorView& output,
                           const TensorView& all_to_all_out,
                           const AlltoAllQuantMatmulOptions& options) {
  AlltoAllQuantMatmulPlan plan(x1, x2, x2_scale, group, output, all_to_all_out, options);
  const ops::CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse
