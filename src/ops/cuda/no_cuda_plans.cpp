// device_plans.hpp in a build without the CUDA backend: device tensors are "not supported".
#include "core/error.hpp"
#include "ops/cuda/device_plans.hpp"

namespace commfuse::ops::cuda {
namespace {

[[noreturn]] void unsupported(const char* op, int rank, Device d) {
  detail::throw_status(Status::kParamInvalid,
                       detail::cat(op, "(rank ", rank, "): the tensors are on ", device_name(d),
                                   ": not supported: this commfuse was built without CUDA "
                                   "(COMMFUSE_CUDA=OFF, no nvcc at build time, or a sanitizer "
                                   "build)"));
}

}  // namespace

std::unique_ptr<PlanImpl> plan_all_gather_matmul(AllGatherMatmulProblem p, void*) {
  unsupported(kAllGatherMatmulOp, p.rank, p.device);
}

std::unique_ptr<PlanImpl> plan_matmul_reduce(const char* op, MatmulReduceProblem p, bool, void*) {
  unsupported(op, p.rank, p.device);
}

std::unique_ptr<PlanImpl> plan_quant_reduce(const char* op, QuantReduceProblem p, bool) {
  unsupported(op, p.rank, p.device);
}

std::unique_ptr<PlanImpl> plan_alltoall_matmul(AlltoAllMatmulProblem p, void*) {
  unsupported(kAlltoAllMatmulOp, p.rank, p.device);
}

std::unique_ptr<PlanImpl> plan_alltoall_quant_matmul(AlltoAllQuantMatmulProblem p, void*) {
  unsupported(kAlltoAllQuantMatmulOp, p.rank, p.device);
}

const char* alltoall_quant_combination(const PlanImpl&) {
  return nullptr;
}

}  // namespace commfuse::ops::cuda
