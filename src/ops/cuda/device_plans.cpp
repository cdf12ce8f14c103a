#include "ops/cuda/device_plans.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "comm/call_check.hpp"
#include "comm/comm_impl.hpp"
#include "core/params.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/permute_quant.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "kernels/cuda/runtime_info.hpp"
#include "kernels/cuda/sum_rows.hpp"
#include "ops/cuda/device_context.hpp"
#include "ops/cuda/device_schedules.hpp"

namespace commfuse::ops::cuda {

// One rank limit for every device kernel the plans admit a call to.
static_assert(kernels::cuda::kMaxSumParts == kernels::cuda::kMaxDequantRanks &&
              kernels::cuda::kMaxSumParts == kernels::cuda::kMaxPermuteRanks);

namespace {

// The device schedule's value in the call signature: apart from every CPU schedule's, so a
// rank calling with host tensors and one with device tensors fail the call naming it.
// cuda_ipc: the peers' regions read in place; nccl: all-gathered into local memory (ranks
// across hosts: ops/cuda/device_context.hpp).
enum class DeviceSchedule { kCudaIpc = 100, kNccl = 101 };
const char* schedule_name(DeviceSchedule s) {
  return s == DeviceSchedule::kNccl ? "nccl" : "cuda_ipc";
}
// Where a schedule finds the peers' data, for the plans' descriptions.
const char* peers_read(DeviceSchedule s) {
  return s == DeviceSchedule::kNccl ? "all-gathered by NCCL into this rank's memory"
                                    : "read in place from the CUDA IPC heap";
}

// The communicator's device context (comm/comm_impl.hpp's attachment).
struct DeviceAttachment final : comm::CommImpl::Attachment {
  std::unique_ptr<DeviceContext> ctx;
};

// Every rank's string, in rank order, over the communicator (set-up exchanges only).
std::vector<std::string> all_gather_strings(comm::Transport& t, const std::string& s) {
  const auto size = static_cast<size_t>(t.size());
  const uint64_t len = s.size();
  std::vector<uint64_t> lens(size);
  t.all_gather(&len, lens.data(), 1, DType::kInt64);
  const uint64_t width = *std::max_element(lens.begin(), lens.end());
  std::string mine = s, all(width * size, '\0');
  mine.resize(width);
  if (width > 0) t.all_gather(mine.data(), all.data(), width, DType::kUInt8);
  std::vector<std::string> out;
  for (size_t r = 0; r < size; ++r) out.emplace_back(all.data() + r * width, lens[r]);
  return out;
}

DeviceContext* existing_context(comm::CommImpl& c) {
  auto* a = dynamic_cast<DeviceAttachment*>(c.attachment());
  return a != nullptr ? a->ctx.get() : nullptr;
}

// The communicator's device context, on the calling thread's current device (checked again
// here: a device changed between planning and executing would put this call's work on
// another GPU than its heap). Every error here comes before the call's first
// synchronization, so it is this rank's rejection: the peers inside the call fail it at
// once naming this rank, and the communicator stays usable. `schedule`: the exchange the
// plan chose (a new context is made with it).
DeviceContext& context_of(const char* op, comm::CommImpl& c, Device d, DeviceSchedule schedule) {
  const bool nccl = schedule == DeviceSchedule::kNccl;
  int current = -1;
  cudaGetDevice(&current);
  if (current != d.index)  // this rank alone finds it, inside the call: the peers are told
    c.reject(
        Status::kRuntimeError,
        detail::cat(op, "(rank ", c.rank(), "): the tensors are on cuda:", d.index,
                    " but the calling thread's device became cuda:", current, " after planning"));
  if (DeviceContext* ctx = existing_context(c)) {
    if (ctx->device() != d.index)  // two plans made on different devices before executing
      c.reject(Status::kParamInvalid,
               detail::cat(op, "(rank ", c.rank(), "): the tensors are on cuda:", d.index,
                           " but this communicator's device calls use cuda:", ctx->device()));
    if (ctx->nccl_mode() != nccl)  // two plans made under different COMMFUSE_DEVICE_TRANSPORT
      c.reject(Status::kParamInvalid,
               detail::cat(op, "(rank ", c.rank(), "): planned for the ", schedule_name(schedule),
                           " exchange, but this communicator's device calls use the other"));
    return *ctx;
  }
  if (c.attachment() != nullptr)
    c.reject(Status::kInner, detail::cat(op, "(rank ", c.rank(),
                                         "): the communicator holds another layer's "
                                         "attachment"));
  comm::CommImpl* cp = &c;  // the attachment dies before the communicator
  auto a = std::make_unique<DeviceAttachment>();
  try {
    a->ctx = std::make_unique<DeviceContext>(
        c.rank(), c.world_size(),
        HostExchange{[cp](const std::string& s) { return all_gather_strings(cp->transport(), s); },
                     [cp] { cp->transport().barrier(); }, params::timeout_seconds(),
                     [cp] { return cp->transport().usable(); }, nccl});
  } catch (const Error& e) {
    c.reject(e.code(), detail::cat(op, "(rank ", c.rank(), "): ", e.what()));
  }
  DeviceContext& ctx = *a->ctx;
  c.attach(std::move(a));
  return ctx;
}

// What only a device call needs, checked while planning (a rejection of this rank's call).
struct Pointer {
  const char* name;
  const void* p;
  DType dtype;  // its elements: the pointer must be aligned to them (kernels read them whole)
};
// Returns the schedule: which exchange the call will use.
DeviceSchedule check_device_call(const OpContext& ctx, Device d, bool gemm,
                                 std::initializer_list<Pointer> pointers) {
  kernels::cuda::require_device(ctx.op());  // RUNTIME_ERROR without a usable device
  const std::string why = gemm ? kernels::cuda::blaslt_unavailable() : std::string();
  if (!why.empty()) ctx.reject(Status::kRuntimeError, "cuBLASLt cannot be used: ", why);
  int current = -1;
  cudaGetDevice(&current);
  if (current != d.index)
    ctx.invalid("the tensors are on cuda:", d.index,
                " but the calling thread's device is cuda:", current,
                " (cudaSetDevice to the tensors' device first)");
  const DeviceContext* dc = existing_context(ctx.comm());
  if (dc != nullptr && dc->device() != d.index)
    ctx.invalid("the tensors are on cuda:", d.index,
                " but this communicator's device calls use cuda:", dc->device(),
                " (one device per communicator and rank)");
  // Ranks on several hosts exchange through NCCL (device_context.hpp): it must load here.
  // An existing context keeps the exchange it was made with (COMMFUSE_DEVICE_TRANSPORT is
  // read once per communicator).
  bool nccl = false;
  if (dc != nullptr) {
    nccl = dc->nccl_mode();
  } else {
    try {
      nccl = comm::nccl::device_calls_use_nccl(ctx.comm().local_ranks() == ctx.world_size());
    } catch (const Error& e) {
      ctx.invalid(e.what());
    }
  }
  if (nccl) {
    if (const std::string why = comm::nccl::nccl_unavailable(); !why.empty())
      ctx.reject(Status::kRuntimeError,
                 "device tensors on ranks across hosts (or COMMFUSE_DEVICE_TRANSPORT=nccl) need "
                 "NCCL: ",
                 why);
  }
  if (ctx.world_size() > kernels::cuda::kMaxSumParts)
    ctx.invalid("device tensors: ", ctx.world_size(), " ranks are not supported (at most ",
                kernels::cuda::kMaxSumParts, ")");
  for (const Pointer& ptr : pointers) {
    if (ptr.p == nullptr) continue;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, ptr.p) != cudaSuccess) {
      cudaGetLastError();  // not a pointer CUDA knows: host memory
      a.type = cudaMemoryTypeUnregistered;
    }
    if (!kernels::cuda::aligned(ptr.p, dtype_storage_bytes(ptr.dtype, 1)))
      ctx.invalid(ptr.name, " is not aligned to its ", dtype_name(ptr.dtype), " elements");
    if ((a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) || a.device != d.index)
      ctx.invalid(ptr.name, " is labeled cuda:", d.index, " but its memory is ",
                  a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
                      ? detail::cat("on cuda:", a.device)
                      : std::string("host memory"));
  }
  return nccl ? DeviceSchedule::kNccl : DeviceSchedule::kCudaIpc;
}

DeviceMatmul operands(const auto& p) {
  DeviceMatmul a;
  a.dtype = p.dtype;
  a.m = p.m;
  a.k = p.k;
  a.n = p.n;
  a.x1 = p.x1;
  a.x2 = p.x2.data;
  a.x2_transposed = p.x2.transposed;
  a.ld_x2 = p.x2.ld;
  a.bias = p.bias.data;
  a.bias_dtype = p.bias.dtype;
  a.out = p.output;
  const QuantScales& q = p.quant;
  a.quantized = q.quantized();
  a.b_dtype = q.b_dtype;
  a.out_dtype = p.out_dtype;
  a.x1_scale = q.x1_scale;
  a.x1_per_token = q.x1_per_token;
  a.x2_scale = q.x2_scale;
  a.x2_per_channel = q.x2_per_channel;
  a.bias_int = q.bias_int;
  return a;
}

// One device call on the communicator's context. A call that fails at its first
// synchronization (a peer rejected it, or the ranks' descriptors disagree: every rank learns
// it alike) leaves the ranks in step and the communicator usable, as on the CPU; any other
// error stops the protocol midway, so the communicator is aborted and the peers fail at once
// naming this rank.
template <typename F>
void run_call(comm::CommImpl& c, DeviceContext& ctx, F&& f) {
  try {
    f();
  } catch (const comm::CallFailed&) {
    if (ctx.cancel_call(/*failed_at_synchronization=*/true)) throw;
    c.transport().abort("a device call failed midway");
    throw;
  } catch (const std::exception& e) {
    ctx.cancel_call(false);
    c.transport().abort(e.what());
    throw;
  }
}

// A device call's plan data (plan_impl.hpp's OpPlan runs it): the validated problem, its
// stream (Plan::execute's overrides it) and, for the ops with two forms, which one.
template <typename Problem>
struct DevicePlan {
  comm::CallSignature signature;
  Problem problem;
  bool all_reduce = false;  // matmul_all_reduce / quant_all_reduce (else reduce_scatter)
  DeviceSchedule schedule = DeviceSchedule::kCudaIpc;
  size_t workspace_bytes = 0;  // the communicator's device context holds the memory
  void* stream = nullptr;
};
using AllGatherMatmulDevicePlan = DevicePlan<AllGatherMatmulProblem>;
using MatmulReduceDevicePlan = DevicePlan<MatmulReduceProblem>;
using QuantReduceDevicePlan = DevicePlan<QuantReduceProblem>;
using AlltoAllDevicePlan = DevicePlan<AlltoAllMatmulProblem>;
using AlltoAllQuantDevicePlan = DevicePlan<AlltoAllQuantMatmulProblem>;

std::string describe(const AllGatherMatmulDevicePlan& d) {
  const auto& p = d.problem;
  return detail::cat(kAllGatherMatmulOp, "(rank ", p.rank, ") m=", p.m, " R=", p.world_size,
                     " k=", p.k, " n=", p.n, " ", dtype_name(p.dtype), " on ",
                     device_name(p.device), ": schedule ", schedule_name(d.schedule),
                     " (local rows first, then each peer's rows ", peers_read(d.schedule),
                     "; cuBLASLt; gather_out by the copy stream)");
}

std::string describe(const MatmulReduceDevicePlan& d) {
  return detail::cat(describe_problem(d.signature.op, d.problem), " on ",
                     device_name(d.problem.device), ": schedule ", schedule_name(d.schedule),
                     " (fp32 partials ", peers_read(d.schedule), ", rank-order sum of ",
                     d.all_reduce ? "all rows" : "this rank's rows", ")");
}

std::string describe(const QuantReduceDevicePlan& d) {
  return detail::cat(
      describe_problem(d.signature.op, d.problem), " on ", device_name(d.problem.device),
      ": schedule ", schedule_name(d.schedule), " (codes and scales ", peers_read(d.schedule),
      ", rank-order dequantize-and-sum of ", d.all_reduce ? "all rows" : "this rank's rows", ")");
}

void run_schedule(const AllGatherMatmulDevicePlan& d, comm::CommImpl& c, void*, void* stream) {
  DeviceContext& ctx = context_of(d.signature.op, c, d.problem.device, d.schedule);
  run_call(c, ctx,
           [&] { all_gather_matmul(ctx, operands(d.problem), d.problem.gather_out, stream); });
}

void run_schedule(const MatmulReduceDevicePlan& d, comm::CommImpl& c, void*, void* stream) {
  DeviceContext& ctx = context_of(d.signature.op, c, d.problem.device, d.schedule);
  run_call(c, ctx, [&] { matmul_reduce(ctx, operands(d.problem), d.all_reduce, stream); });
}

void run_schedule(const QuantReduceDevicePlan& d, comm::CommImpl& c, void*, void* stream) {
  DeviceContext& ctx = context_of(d.signature.op, c, d.problem.device, d.schedule);
  const QuantReduceProblem& p = d.problem;
  DeviceQuantReduce a;
  a.x_dtype = p.x_dtype;
  a.mx = p.kind == kernels::cpu::ScaleKind::kMx32;
  a.rows = p.rows;
  a.h = p.h;
  a.x = p.x;
  a.scales = p.scales;
  a.scale_row_bytes = p.scale_bytes();
  a.out_dtype = p.out_dtype;
  a.out = p.output;
  run_call(c, ctx, [&] { quant_reduce(ctx, a, d.all_reduce, stream); });
}

std::string describe_alltoall(const char* op, int rank, int world_size, int64_t bs, int64_t h,
                              int64_t n, DType dtype, Device device, DeviceSchedule schedule,
                              std::string_view how) {
  return detail::cat(op, "(rank ", rank, ") BS=", bs, " H=", h, " N=", n, " R=", world_size, " ",
                     dtype_name(dtype), " on ", device_name(device), ": schedule ",
                     schedule_name(schedule), " (every rank's x1 ", peers_read(schedule), ", ", how,
                     ")");
}

std::string describe(const AlltoAllDevicePlan& d) {
  const auto& p = d.problem;
  return describe_alltoall(kAlltoAllMatmulOp, p.rank, p.world_size, p.bs, p.h, p.n, p.dtype,
                           p.device, d.schedule, "permuted by strided copies, one cuBLASLt GEMM");
}

std::string describe(const AlltoAllQuantDevicePlan& d) {
  const auto& p = d.problem;
  const std::string how =
      p.combo == QuantCombo::kA4W4
          ? "A4W4: permute widening int4 to int8, one cuBLASLt int8 GEMM per source segment, "
            "dequantizing epilogue summing them in rank order"
          : detail::cat(combo_name(p.combo),
                        ": permute + per-token quantization, cuBLASLt int8 GEMM, dequantizing "
                        "epilogue");
  const bool converted = p.combo != QuantCombo::kA16W8 || !p.x2_transposed;
  return describe_alltoall(kAlltoAllQuantMatmulOp, p.rank, p.world_size, p.bs, p.h, p.n, p.x1_dtype,
                           p.device, d.schedule,
                           converted ? how + "; x2 converted to int8 (N, R*H) each call" : how);
}

// The fields both alltoall problems share (x1's dtype named differently in each).
DeviceAlltoAll alltoall_operands(DType x1_dtype, const auto& p) {
  DeviceAlltoAll a;
  a.x1_dtype = x1_dtype;
  a.bs = p.bs;
  a.h = p.h;
  a.n = p.n;
  a.x1 = p.x1;
  a.x2 = p.x2;
  a.x2_transposed = p.x2_transposed;
  a.bias = p.bias.data;
  a.bias_dtype = p.bias.dtype;
  a.out_dtype = x1_dtype;
  a.out = p.output;
  a.all_to_all_out = p.all_to_all_out;
  return a;
}

DeviceAlltoAll quant_alltoall_operands(const AlltoAllQuantMatmulProblem& p) {
  DeviceAlltoAll a = alltoall_operands(p.x1_dtype, p);
  a.quantized = true;
  a.b_dtype = p.combo == QuantCombo::kA16W8 ? DType::kInt8 : DType::kInt4;
  a.out_dtype = p.out_dtype;
  a.x2_scale = p.x2_scale;
  a.smooth = p.smooth;
  a.token_scale = p.token_scale;
  return a;
}

void run_schedule(const AlltoAllDevicePlan& d, comm::CommImpl& c, void*, void* stream) {
  DeviceContext& ctx = context_of(kAlltoAllMatmulOp, c, d.problem.device, d.schedule);
  const DeviceAlltoAll a = alltoall_operands(d.problem.dtype, d.problem);
  run_call(c, ctx, [&] { alltoall_matmul(ctx, a, stream); });
}

void run_schedule(const AlltoAllQuantDevicePlan& d, comm::CommImpl& c, void*, void* stream) {
  DeviceContext& ctx = context_of(kAlltoAllQuantMatmulOp, c, d.problem.device, d.schedule);
  const DeviceAlltoAll a = quant_alltoall_operands(d.problem);
  run_call(c, ctx, [&] { alltoall_matmul(ctx, a, stream); });
}

// What the three matmul ops' device calls share: the SPEC §6 layout, the device, every
// pointer (`extra`: all_gather_matmul's gather_out) and the GEMM the schedule will issue.
template <typename Problem>
DeviceSchedule check_matmul_call(const OpContext& ctx, const Problem& p, Pointer extra) {
  const DeviceSchedule schedule =
      check_device_call(ctx, p.device, /*gemm=*/true,
                        {{"x1", p.x1, p.dtype},
                         {"x2", p.x2.data, p.quant.quantized() ? p.quant.b_dtype : p.dtype},
                         {"x1_scale", p.quant.x1_scale, DType::kFloat32},
                         {"x2_scale", p.quant.x2_scale, DType::kFloat32},
                         {"bias", p.bias.data, p.bias.dtype},
                         {"bias", p.quant.bias_int, DType::kInt32},
                         {"output", p.output, p.out_dtype},
                         extra});
  if (const std::string why = matmul_gemm_unsupported(operands(p)); !why.empty()) ctx.invalid(why);
  return schedule;
}

}  // namespace

std::unique_ptr<PlanImpl> plan_all_gather_matmul(AllGatherMatmulProblem p, void* stream) {
  const OpContext ctx(kAllGatherMatmulOp, p.group);
  AllGatherMatmulDevicePlan d;
  d.schedule = check_matmul_call(ctx, p, {"gather_out", p.gather_out, p.dtype});
  d.signature = matmul_signature(kAllGatherMatmulOp, p, d.schedule);
  d.problem = std::move(p);
  d.stream = stream;
  return make_plan(std::move(d));
}

std::unique_ptr<PlanImpl> plan_matmul_reduce(const char* op, MatmulReduceProblem p, bool all_reduce,
                                             void* stream) {
  const OpContext ctx(op, p.group);
  MatmulReduceDevicePlan d;
  d.schedule = check_matmul_call(ctx, p, {"gather_out", nullptr, p.dtype});
  d.signature = matmul_signature(op, p, d.schedule);
  // Present or not on every rank alike (lost when the host plans' digest became a
  // per-call field, which device plans do not set).
  add_bias_field(p, d.signature, /*digest=*/false);
  d.problem = std::move(p);
  d.all_reduce = all_reduce;
  d.stream = stream;
  return make_plan(std::move(d));
}

std::unique_ptr<PlanImpl> plan_quant_reduce(const char* op, QuantReduceProblem p, bool all_reduce) {
  const OpContext ctx(op, p.group);
  // The codes and scales are copied byte for byte into the heap: no alignment needed.
  QuantReduceDevicePlan d;
  d.schedule = check_device_call(ctx, p.device, /*gemm=*/false,
                                 {{"x", p.x, DType::kUInt8},
                                  {"scales", p.scales, DType::kUInt8},
                                  {"output", p.output, p.out_dtype}});
  d.signature = quant_reduce_signature(op, p, d.schedule);
  d.problem = std::move(p);
  d.all_reduce = all_reduce;
  return make_plan(std::move(d));
}

std::unique_ptr<PlanImpl> plan_alltoall_matmul(AlltoAllMatmulProblem p, void* stream) {
  const OpContext ctx(kAlltoAllMatmulOp, p.group);
  AlltoAllDevicePlan d;
  d.schedule = check_device_call(ctx, p.device, /*gemm=*/true,
                                 {{"x1", p.x1, p.dtype},
                                  {"x2", p.x2, p.dtype},
                                  {"bias", p.bias.data, p.bias.dtype},
                                  {"output", p.output, p.dtype},
                                  {"all_to_all_out", p.all_to_all_out, p.dtype}});
  if (const std::string why =
          alltoall_gemm_unsupported(alltoall_operands(p.dtype, p), p.world_size);
      !why.empty())
    ctx.invalid(why);
  d.signature = alltoall_matmul_signature(kAlltoAllMatmulOp, p, d.schedule);
  d.problem = std::move(p);
  d.stream = stream;
  return make_plan(std::move(d));
}

std::unique_ptr<PlanImpl> plan_alltoall_quant_matmul(AlltoAllQuantMatmulProblem p, void* stream) {
  const OpContext ctx(kAlltoAllQuantMatmulOp, p.group);
  const DeviceAlltoAll a = quant_alltoall_operands(p);
  AlltoAllQuantDevicePlan d;
  d.schedule = check_device_call(ctx, p.device, /*gemm=*/true,
                                 {{"x1", p.x1, p.x1_dtype},
                                  {"x2", p.x2, a.b_dtype},
                                  {"x2_scale", p.x2_scale, DType::kFloat32},
                                  {"smooth scale (x1ScaleOptional)", p.smooth, p.x1_dtype},
                                  {"token scale (x1ScaleOptional)", p.token_scale, DType::kFloat32},
                                  {"bias", p.bias.data, p.bias.dtype},
                                  {"output", p.output, p.out_dtype},
                                  {"all_to_all_out", p.all_to_all_out, p.x1_dtype}});
  if (const std::string why = alltoall_gemm_unsupported(a, p.world_size); !why.empty())
    ctx.invalid(why);
  d.signature = alltoall_quant_matmul_signature(kAlltoAllQuantMatmulOp, p, d.schedule);
  d.problem = std::move(p);
  d.stream = stream;
  return make_plan(std::move(d));
}

const char* alltoall_quant_combination(const PlanImpl& plan) {
  const auto* p = dynamic_cast<const OpPlan<AlltoAllQuantDevicePlan>*>(&plan);
  return p != nullptr ? combo_name(p->data().problem.combo) : nullptr;
}

}  // namespace commfuse::ops::cuda
