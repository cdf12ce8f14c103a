// C entry points of the fused operators (aclnn shape): tensor descriptors, then per op
// XxxGetWorkspaceSize (all validation; makes the executor) and Xxx (runs and frees it).
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <cstring>
#include <memory>
#include <optional>

#include "api/c_api_executor.hpp"
#include "api/c_api_guard.hpp"
#include "comm/comm_impl.hpp"
#include "core/dtype_valid.hpp"
#include "core/error.hpp"
#include "kernels/cuda/runtime_info.hpp"
#include "ops/common/tensor_checks.hpp"
#include "ops/common/tensor_size.hpp"

namespace {

using commfuse::TensorView;
using commfuse::api::guarded;
using commfuse::api::optional_tensor_view;
using commfuse::api::tensor_or_null;
using commfuse::api::tensor_view;

// streamMode has no meaning on CPU; 1 is the only value CANN defines, so ported code passes
// it and anything else is a mistake worth reporting. Checked after the plan (which found the
// group), so the rejection names the rank and is told to the peers like every other.
void check_stream_mode(const char* op, const char* group, int64_t stream_mode) {
  if (stream_mode == 1) return;
  commfuse::comm::CommImpl& c = commfuse::find_comm(group).impl();
  c.reject(commfuse::Status::kParamInvalid,
           commfuse::detail::cat(op, "(rank ", c.rank(), "): streamMode is ", stream_mode,
                                 " but must be 1"));
}

// The C API has no world_size argument (aclnn takes the group only): it is the group's.
int group_size(const char* op, const char* group) {
  try {
    return commfuse::find_comm(group).world_size();
  } catch (const commfuse::Error& e) {
    commfuse::detail::throw_status(e.code(), commfuse::detail::cat(op, ": group: ", e.what()));
  }
}

// The V1 and V2 (SPEC §6: with x1Scale / x2Scale) forms of each op share one body; fn names
// the entry point the caller used.
commfuseStatus_t all_gather_matmul_plan(const char* fn, const commfuseTensor_t* x1,
                                        const commfuseTensor_t* x2, const commfuseTensor_t* bias,
                                        const commfuseTensor_t* x1Scale,
                                        const commfuseTensor_t* x2Scale, const char* group,
                                        int64_t gatherIndex, int64_t commTurn, int64_t streamMode,
                                        const commfuseTensor_t* output,
                                        const commfuseTensor_t* gatherOut, uint64_t* workspaceSize,
                                        commfuseOpExecutor_t** executor) {
  constexpr const char* op = "all_gather_matmul";
  return guarded(fn, [&] {
    commfuse::AllGatherMatmulOptions o;
    commfuse::api::WeightArg x2a;
    TensorView x1v, outv, gatherv;
    const auto held = commfuse::api::before_plan(op, group, workspaceSize, executor, [&] {
      x1v = tensor_view(x1, fn, "x1");
      x2a = commfuse::api::weight_arg(x2, fn, "x2");
      outv = tensor_view(output, fn, "output");
      gatherv = tensor_view(gatherOut, fn, "gatherOut");
      o.bias = optional_tensor_view(bias, fn, "bias");
      o.x1_scale = optional_tensor_view(x1Scale, fn, "x1Scale");
      o.x2_scale = optional_tensor_view(x2Scale, fn, "x2Scale");
    });
    o.packed_x2 = x2a.packed.get();
    o.gather_index = gatherIndex;
    // No gather_out, or torch's empty (0,) tensor: the gathered rows are not returned.
    o.gather_output = gatherOut != nullptr && !(gatherv.ndim == 1 && gatherv.shape[0] == 0);
    o.comm_turn = commTurn;
    const int world = group_size(op, group);
    auto plan = std::make_unique<commfuse::AllGatherMatmulPlan>(x1v, x2a.view, group, world, outv,
                                                                gatherv, o);
    check_stream_mode(op, group, streamMode);
    *executor = commfuse::api::make_executor(op, std::move(plan), workspaceSize, x2a.packed);
  });
}

// matmul_reduce_scatter (all_reduce false) and matmul_all_reduce.
commfuseStatus_t matmul_reduce_plan(const char* fn, bool all_reduce, const commfuseTensor_t* x1,
                                    const commfuseTensor_t* x2, const commfuseTensor_t* bias,
                                    const commfuseTensor_t* x1Scale,
                                    const commfuseTensor_t* x2Scale, const char* group,
                                    const char* reduceOp, int64_t commTurn, int64_t streamMode,
                                    const commfuseTensor_t* output, uint64_t* workspaceSize,
                                    commfuseOpExecutor_t** executor) {
  const char* op = all_reduce ? "matmul_all_reduce" : "matmul_reduce_scatter";
  return guarded(fn, [&] {
    commfuse::MatmulReduceOptions o;
    commfuse::api::WeightArg x2a;
    TensorView x1v, outv;
    const auto held = commfuse::api::before_plan(op, group, workspaceSize, executor, [&] {
      CF_CHECK_NOTNULL(reduceOp, "reduceOp is null");
      x1v = tensor_view(x1, fn, "x1");
      x2a = commfuse::api::weight_arg(x2, fn, "x2");
      outv = tensor_view(output, fn, "output");
      o.bias = optional_tensor_view(bias, fn, "bias");
      o.x1_scale = optional_tensor_view(x1Scale, fn, "x1Scale");
      o.x2_scale = optional_tensor_view(x2Scale, fn, "x2Scale");
    });
    o.reduce_op = reduceOp;
    o.comm_turn = commTurn;
    o.packed_x2 = x2a.packed.get();
    std::unique_ptr<commfuse::Plan> plan;
    if (all_reduce)
      plan = std::make_unique<commfuse::MatmulAllReducePlan>(x1v, x2a.view, group, outv, o);
    else
      plan = std::make_unique<commfuse::MatmulReduceScatterPlan>(x1v, x2a.view, group,
                                                                 group_size(op, group), outv, o);
    check_stream_mode(op, group, streamMode);
    *executor = commfuse::api::make_executor(op, std::move(plan), workspaceSize, x2a.packed);
  });
}

// An op's second call (Xxx or XxxV2, fn): runs and frees its executor.
commfuseStatus_t run_op(const char* fn, const char* op, void* workspace, uint64_t workspace_size,
                        commfuseOpExecutor_t* executor, void* stream) {
  return guarded(fn, [&] {
    commfuse::api::run_executor(fn, op, executor, workspace, workspace_size, stream);
  });
}

}  // namespace

extern "C" {

commfuseTensor_t* commfuseCreateTensor(const int64_t* shape, uint64_t ndim, const int64_t* strides,
                                       commfuseDataType dtype, void* data) {
  commfuseTensor_t* out = nullptr;
  guarded("commfuseCreateTensor", [&] {
    CF_CHECK_ARG(ndim >= 1 && ndim <= static_cast<uint64_t>(TensorView::kMaxDims),
                 "commfuseCreateTensor: ndim is ", ndim, " but must be 1..", TensorView::kMaxDims);
    CF_CHECK_NOTNULL(shape, "commfuseCreateTensor: shape is null (ndim ", ndim, ")");
    CF_CHECK_ARG(commfuse::detail::dtype_is_valid(static_cast<commfuse::DType>(dtype)),
                 "commfuseCreateTensor: dtype value ", static_cast<int>(dtype),
                 " is not a commfuse dtype");
    auto t = std::make_shared<commfuseTensor>();
    TensorView& v = t->view;
    v.data = data;
    v.dtype = static_cast<commfuse::DType>(dtype);
    v.ndim = static_cast<int>(ndim);
    for (int i = v.ndim - 1; i >= 0; --i) {
      CF_CHECK_ARG(shape[i] >= 0, "commfuseCreateTensor: shape[", i, "] is ", shape[i],
                   " (negative)");
      v.shape[i] = shape[i];
    }
    CF_CHECK_ARG(commfuse::ops::size_fits_int64(v), "commfuseCreateTensor: shape ",
                 commfuse::ops::shape_str(v), " holds more than 2^63 - 1 bytes of ",
                 commfuse::dtype_name(v.dtype));
    int64_t contiguous = 1;  // no overflow: bounded by the product just checked
    for (int i = v.ndim - 1; i >= 0; --i) {
      v.strides[i] = strides != nullptr ? strides[i] : contiguous;
      contiguous *= v.shape[i];
    }
    out = commfuse::api::tensors().add<commfuseTensor_t>(std::move(t));
  });
  return out;
}

commfuseStatus_t commfuseDestroyTensor(const commfuseTensor_t* tensor) {
  return guarded("commfuseDestroyTensor", [&] {
    commfuse::api::destroy_handle(commfuse::api::tensors(), tensor, "commfuseDestroyTensor",
                                  "tensor", "tensor descriptor", "commfuseCreateTensor");
  });
}

commfuseStatus_t commfuseSetTensorDevice(commfuseTensor_t* tensor, commfuseDeviceType type,
                                         int index) {
  constexpr const char* fn = "commfuseSetTensorDevice";
  return guarded(fn, [&] {
    const auto t = commfuse::api::live_tensor(tensor, fn, "tensor");
    CF_CHECK_ARG(type == COMMFUSE_DEVICE_CPU || type == COMMFUSE_DEVICE_CUDA, fn, ": type ",
                 static_cast<int>(type),
                 " is not COMMFUSE_DEVICE_CPU (0) or COMMFUSE_DEVICE_CUDA (1)");
    CF_CHECK_ARG(type == COMMFUSE_DEVICE_CUDA ? index >= 0 : index == 0, fn, ": index ", index,
                 type == COMMFUSE_DEVICE_CUDA ? " is negative (a CUDA device ordinal)"
                                              : " must be 0 for COMMFUSE_DEVICE_CPU");
    // Past the devices present (where they can be counted: without a usable device the
    // operator says so, naming the device, at planning).
    if (type == COMMFUSE_DEVICE_CUDA && commfuse::kernels::cuda::device_available()) {
      const int n = commfuse::kernels::cuda::runtime_info().device_count;
      CF_CHECK_ARG(index < n, fn, ": index ", index, " is past this host's CUDA devices (", n,
                   ": ordinals 0-", n - 1, ")");
    }
    t->view.device = {static_cast<commfuse::DeviceType>(type), index};
  });
}

commfuseStatus_t commfuseAllGatherMatmulGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* bias,
    const char* group, int64_t gatherIndex, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, const commfuseTensor_t* gatherOut, uint64_t* workspaceSize,
    commfuseOpExecutor_t** executor) {
  return all_gather_matmul_plan("commfuseAllGatherMatmulGetWorkspaceSize", x1, x2, bias, nullptr,
                                nullptr, group, gatherIndex, commTurn, streamMode, output,
                                gatherOut, workspaceSize, executor);
}

commfuseStatus_t commfuseAllGatherMatmulV2GetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2ScaleOptional,
    const char* group, int64_t gatherIndex, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, const commfuseTensor_t* gatherOut, uint64_t* workspaceSize,
    commfuseOpExecutor_t** executor) {
  return all_gather_matmul_plan("commfuseAllGatherMatmulV2GetWorkspaceSize", x1, x2, biasOptional,
                                x1ScaleOptional, x2ScaleOptional, group, gatherIndex, commTurn,
                                streamMode, output, gatherOut, workspaceSize, executor);
}

commfuseStatus_t commfuseAllGatherMatmulV2(void* workspace, uint64_t workspaceSize,
                                           commfuseOpExecutor_t* executor, void* stream) {
  return run_op("commfuseAllGatherMatmulV2", "all_gather_matmul", workspace, workspaceSize,
                executor, stream);
}

commfuseStatus_t commfuseAllGatherMatmul(void* workspace, uint64_t workspaceSize,
                                         commfuseOpExecutor_t* executor, void* stream) {
  return run_op("commfuseAllGatherMatmul", "all_gather_matmul", workspace, workspaceSize, executor,
                stream);
}

commfuseStatus_t commfuseMatmulReduceScatterGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* bias,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor) {
  return matmul_reduce_plan("commfuseMatmulReduceScatterGetWorkspaceSize", false, x1, x2, bias,
                            nullptr, nullptr, group, reduceOp, commTurn, streamMode, output,
                            workspaceSize, executor);
}

commfuseStatus_t commfuseMatmulReduceScatterV2GetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2ScaleOptional,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor) {
  return matmul_reduce_plan("commfuseMatmulReduceScatterV2GetWorkspaceSize", false, x1, x2,
                            biasOptional, x1ScaleOptional, x2ScaleOptional, group, reduceOp,
                            commTurn, streamMode, output, workspaceSize, executor);
}

commfuseStatus_t commfuseMatmulReduceScatterV2(void* workspace, uint64_t workspaceSize,
                                               commfuseOpExecutor_t* executor, void* stream) {
  return run_op("commfuseMatmulReduceScatterV2", "matmul_reduce_scatter", workspace, workspaceSize,
                executor, stream);
}

commfuseStatus_t commfuseMatmulReduceScatter(void* workspace, uint64_t workspaceSize,
                                             commfuseOpExecutor_t* executor, void* stream) {
  return run_op("commfuseMatmulReduceScatter", "matmul_reduce_scatter", workspace, workspaceSize,
                executor, stream);
}

commfuseStatus_t commfuseMatmulAllReduceGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* bias,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor) {
  return matmul_reduce_plan("commfuseMatmulAllReduceGetWorkspaceSize", true, x1, x2, bias, nullptr,
                            nullptr, group, reduceOp, commTurn, streamMode, output, workspaceSize,
                            executor);
}

commfuseStatus_t commfuseMatmulAllReduceV2GetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2ScaleOptional,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor) {
  return matmul_reduce_plan("commfuseMatmulAllReduceV2GetWorkspaceSize", true, x1, x2, biasOptional,
                            x1ScaleOptional, x2ScaleOptional, group, reduceOp, commTurn, streamMode,
                            output, workspaceSize, executor);
}

commfuseStatus_t commfuseMatmulAllReduceV2(void* workspace, uint64_t workspaceSize,
                                           commfuseOpExecutor_t* executor, void* stream) {
  return run_op("commfuseMatmulAllReduceV2", "matmul_all_reduce", workspace, workspaceSize,
                executor, stream);
}

commfuseStatus_t commfuseMatmulAllReduce(void* workspace, uint64_t workspaceSize,
                                         commfuseOpExecutor_t* executor, void* stream) {
  return run_op("commfuseMatmulAllReduce", "matmul_all_reduce", workspace, workspaceSize, executor,
                stream);
}

}  // extern "C"
