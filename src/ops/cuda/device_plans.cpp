#include "ops/cuda/device_plans.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm_impl.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/runtime_info.hpp"
#include "kernels/cuda/sum_rows.hpp"
#include "ops/cuda/device_context.hpp"
#include "ops/cuda/device_schedules.hpp"

namespace commfuse::ops::cuda {
namespace {

// The device schedule's value in the call signature: apart from every CPU schedule's, so a
// rank calling with host tensors and one with device tensors fail the call naming it.
enum class DeviceSchedule { kCudaIpc = 100 };
const char* schedule_name(DeviceSchedule) {
  return "cuda_ipc";
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

DeviceContext& context_of(comm::CommImpl& c) {
  if (DeviceContext* ctx = existing_context(c)) return *ctx;
  comm::CommImpl* cp = &c;  // the attachment dies before the communicator
  auto a = std::make_unique<DeviceAttachment>();
  a->ctx = std::make_unique<DeviceContext>(
      c.rank(), c.world_size(),
      HostExchange{[cp](const std::string& s) { return all_gather_strings(cp->transport(), s); },
                   [cp] { cp->transport().barrier(); }});
  DeviceContext& ctx = *a->ctx;
  c.attach(std::move(a));
  return ctx;
}

// What only a device call needs, checked while planning (a rejection of this rank's call).
struct Pointer {
  const char* name;
  const void* p;
};
void check_device_call(const OpContext& ctx, Device d, bool quantized,
                       std::initializer_list<Pointer> pointers) {
  kernels::cuda::require_device(ctx.op());  // RUNTIME_ERROR without a usable device
  const std::string why = kernels::cuda::blaslt_unavailable();
  if (!why.empty()) ctx.reject(Status::kRuntimeError, "cuBLASLt cannot be used: ", why);
  int current = -1;
  cudaGetDevice(&current);
  if (current != d.index)
    ctx.invalid("the tensors are on cuda:", d.index,
                " but the calling thread's device is cuda:", current,
                " (cudaSetDevice to the tensors' device first)");
  if (const DeviceContext* dc = existing_context(ctx.comm());
      dc != nullptr && dc->device() != d.index)
    ctx.invalid("the tensors are on cuda:", d.index,
                " but this communicator's device calls use cuda:", dc->device(),
                " (one device per communicator and rank)");
  if (quantized)
    ctx.invalid(
        "quantized operands (SPEC §6) on CUDA devices: not supported yet (host tensors are)");
  if (ctx.comm().local_ranks() != ctx.world_size())
    ctx.invalid(
        "device tensors need every rank on one host (CUDA IPC); ranks on several hosts: "
        "not supported yet (an NCCL transport is not built)");
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
    if ((a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) || a.device != d.index)
      ctx.invalid(ptr.name, " is labeled cuda:", d.index, " but its memory is ",
                  a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
                      ? detail::cat("on cuda:", a.device)
                      : std::string("host memory"));
  }
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
  return a;
}

// A RUNTIME_ERROR inside a device call leaves the ranks' protocol where it stopped: the
// communicator is aborted so that the peers fail at once naming this rank.
template <typename F>
void run_or_abort(comm::CommImpl& c, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() == Status::kRuntimeError) c.transport().abort(e.what());
    throw;
  }
}

struct AllGatherMatmulDevicePlan {
  comm::CallSignature signature;
  AllGatherMatmulProblem problem;
  DeviceSchedule schedule = DeviceSchedule::kCudaIpc;
  size_t workspace_bytes = 0;  // the communicator's device context holds the memory
  void* stream = nullptr;
};

struct MatmulReduceDevicePlan {
  comm::CallSignature signature;
  MatmulReduceProblem problem;
  const char* op = nullptr;
  bool all_reduce = false;
  DeviceSchedule schedule = DeviceSchedule::kCudaIpc;
  size_t workspace_bytes = 0;
  void* stream = nullptr;
};

std::string describe(const AllGatherMatmulDevicePlan& d) {
  const auto& p = d.problem;
  return detail::cat(kAllGatherMatmulOp, "(rank ", p.rank, ") m=", p.m, " R=", p.world_size,
                     " k=", p.k, " n=", p.n, " ", dtype_name(p.dtype), " on ",
                     device_name(p.device),
                     ": schedule cuda_ipc (local rows first, then each peer's rows read in "
                     "place from the CUDA IPC heap; cuBLASLt; gather_out by the copy stream)");
}

std::string describe(const MatmulReduceDevicePlan& d) {
  return detail::cat(describe_problem(d.op, d.problem), " on ", device_name(d.problem.device),
                     ": schedule cuda_ipc (fp32 partial in the CUDA IPC heap, rank-order sum of ",
                     d.all_reduce ? "all rows" : "this rank's rows", " read in place)");
}

void run_schedule(const AllGatherMatmulDevicePlan& d, comm::CommImpl& c, void*) {
  run_or_abort(c, [&] {
    all_gather_matmul(context_of(c), operands(d.problem), d.problem.gather_out, d.stream);
  });
}

void run_schedule(const MatmulReduceDevicePlan& d, comm::CommImpl& c, void*) {
  run_or_abort(c,
               [&] { matmul_reduce(context_of(c), operands(d.problem), d.all_reduce, d.stream); });
}

}  // namespace

std::unique_ptr<PlanImpl> plan_all_gather_matmul(AllGatherMatmulProblem p, void* stream) {
  const OpContext ctx(kAllGatherMatmulOp, p.group);
  check_device_call(ctx, p.device, p.quant.mode != QuantMatmulMode::kNone,
                    {{"x1", p.x1},
                     {"x2", p.x2.data},
                     {"bias", p.bias.data},
                     {"output", p.output},
                     {"gather_out", p.gather_out}});
  AllGatherMatmulDevicePlan d;
  d.signature = matmul_signature(kAllGatherMatmulOp, p, d.schedule);
  d.problem = std::move(p);
  d.stream = stream;
  return make_plan(std::move(d));
}

std::unique_ptr<PlanImpl> plan_matmul_reduce(const char* op, MatmulReduceProblem p, bool all_reduce,
                                             void* stream) {
  const OpContext ctx(op, p.group);
  check_device_call(ctx, p.device, p.quant.mode != QuantMatmulMode::kNone,
                    {{"x1", p.x1}, {"x2", p.x2.data}, {"bias", p.bias.data}, {"output", p.output}});
  MatmulReduceDevicePlan d;
  d.signature = matmul_signature(op, p, d.schedule);
  d.problem = std::move(p);
  d.op = op;
  d.all_reduce = all_reduce;
  d.stream = stream;
  return make_plan(std::move(d));
}

}  // namespace commfuse::ops::cuda
