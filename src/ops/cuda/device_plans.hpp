// all_gather_matmul, matmul_reduce_scatter and matmul_all_reduce on CUDA device tensors: the
// plan of a problem validated by the op's own rules (validate.cpp) whose tensors are on a
// CUDA device. Planning checks what only a device call needs (a usable device, the current
// one, device memory behind every pointer, every rank on one host, no SPEC §6 quantized
// operands yet) and rejects the call on this rank like any argument error; execute queues
// the schedule (device_schedules.hpp) on the options' stream over the communicator's device
// context, created by its first device call. A build without CUDA answers PARAM_INVALID
// "not supported" (no_cuda_plans.cpp).
#pragma once

#include <memory>

#include "ops/all_gather_matmul/plan.hpp"
#include "ops/common/matmul_reduce.hpp"
#include "ops/common/plan_impl.hpp"

namespace commfuse::ops::cuda {

std::unique_ptr<PlanImpl> plan_all_gather_matmul(AllGatherMatmulProblem p, void* stream);
// op: kMatmulReduceScatterOp (all_reduce false) or kMatmulAllReduceOp.
std::unique_ptr<PlanImpl> plan_matmul_reduce(const char* op, MatmulReduceProblem p, bool all_reduce,
                                             void* stream);

}  // namespace commfuse::ops::cuda
