// C entry points of the quantized reductions (aclnn shape: XxxGetWorkspaceSize validates
// and makes the executor, Xxx runs and frees it) and of the quantize helpers.
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <memory>

#include "api/c_api_executor.hpp"
#include "api/c_api_guard.hpp"
#include "core/error.hpp"

namespace {

using commfuse::api::guarded;
using commfuse::api::tensor_view;

template <typename OpPlanT>
commfuseStatus_t plan_quant(const char* fn, const char* op, const commfuseTensor_t* x,
                            const commfuseTensor_t* scales, const char* group, const char* reduceOp,
                            const commfuseTensor_t* output, uint64_t* workspaceSize,
                            commfuseOpExecutor_t** executor) {
  return guarded(fn, [&] {
    commfuse::TensorView xv, sv, outv;
    const auto held = commfuse::api::before_plan(op, group, workspaceSize, executor, [&] {
      CF_CHECK_NOTNULL(reduceOp, "reduceOp is null");
      xv = tensor_view(x, fn, "x");
      sv = tensor_view(scales, fn, "scales");
      outv = tensor_view(output, fn, "output");
    });
    auto plan = std::make_unique<OpPlanT>(xv, sv, group, reduceOp, outv);
    *executor = commfuse::api::make_executor(op, std::move(plan), workspaceSize);
  });
}

}  // namespace

extern "C" {

commfuseStatus_t commfuseQuantAllReduceGetWorkspaceSize(const commfuseTensor_t* x,
                                                        const commfuseTensor_t* scales,
                                                        const char* group, const char* reduceOp,
                                                        const commfuseTensor_t* output,
                                                        uint64_t* workspaceSize,
                                                        commfuseOpExecutor_t** executor) {
  return plan_quant<commfuse::QuantAllReducePlan>("commfuseQuantAllReduceGetWorkspaceSize",
                                                  "quant_all_reduce", x, scales, group, reduceOp,
                                                  output, workspaceSize, executor);
}

commfuseStatus_t commfuseQuantAllReduce(void* workspace, uint64_t workspaceSize,
                                        commfuseOpExecutor_t* executor, void* stream) {
  constexpr const char* fn = "commfuseQuantAllReduce";
  return guarded(fn, [&] {
    commfuse::api::run_executor(fn, "quant_all_reduce", executor, workspace, workspaceSize, stream);
  });
}

commfuseStatus_t commfuseQuantReduceScatterGetWorkspaceSize(const commfuseTensor_t* x,
                                                            const commfuseTensor_t* scales,
                                                            const char* group, const char* reduceOp,
                                                            const commfuseTensor_t* output,
                                                            uint64_t* workspaceSize,
                                                            commfuseOpExecutor_t** executor) {
  return plan_quant<commfuse::QuantReduceScatterPlan>("commfuseQuantReduceScatterGetWorkspaceSize",
                                                      "quant_reduce_scatter", x, scales, group,
                                                      reduceOp, output, workspaceSize, executor);
}

commfuseStatus_t commfuseQuantReduceScatter(void* workspace, uint64_t workspaceSize,
                                            commfuseOpExecutor_t* executor, void* stream) {
  constexpr const char* fn = "commfuseQuantReduceScatter";
  return guarded(fn, [&] {
    commfuse::api::run_executor(fn, "quant_reduce_scatter", executor, workspace, workspaceSize,
                                stream);
  });
}

commfuseStatus_t commfuseQuantize(const commfuseTensor_t* x, const char* mode, int64_t groupSize,
                                  const commfuseTensor_t* q, const commfuseTensor_t* scales) {
  return guarded("commfuseQuantize", [&] {
    CF_CHECK_NOTNULL(mode, "quantize: mode is null");
    constexpr const char* fn = "commfuseQuantize";
    commfuse::quantize(tensor_view(x, fn, "x"), mode, tensor_view(q, fn, "q"),
                       tensor_view(scales, fn, "scales"), groupSize);
  });
}

commfuseStatus_t commfuseDequantize(const commfuseTensor_t* q, const commfuseTensor_t* scales,
                                    const char* mode, int64_t groupSize,
                                    const commfuseTensor_t* output) {
  return guarded("commfuseDequantize", [&] {
    CF_CHECK_NOTNULL(mode, "dequantize: mode is null");
    constexpr const char* fn = "commfuseDequantize";
    commfuse::dequantize(tensor_view(q, fn, "q"), tensor_view(scales, fn, "scales"), mode,
                         tensor_view(output, fn, "output"), groupSize);
  });
}

}  // extern "C"
