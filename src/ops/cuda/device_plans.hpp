// all_gather_matmul, matmul_reduce_scatter, matmul_all_reduce, quant_all_reduce,
// quant_reduce_scatter, alltoall_matmul and alltoall_quant_matmul on CUDA device tensors: the plan
// of a problem validated by the op's own rules (validate.cpp) whose tensors are on a CUDA device.
// Planning checks what only a device call needs (a usable device, the current one, device memory
// behind every pointer, element alignment, every rank on one host; SPEC §6 A8W8 / FP8 with x2
// transposed, no HiFloat8: cuBLASLt's GEMMs) and rejects the call on this rank like any argument
// error; execute queues the schedule (device_schedules.hpp) on the call's stream over the
// communicator's device context, created by its first device call. A build without CUDA answers
// PARAM_INVALID "not supported" (no_cuda_plans.cpp).
#pragma once

#include <memory>

#include "ops/all_gather_matmul/plan.hpp"
#include "ops/alltoall_matmul/plan.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/common/matmul_reduce.hpp"
#include "ops/common/plan_impl.hpp"
#include "ops/common/quant_reduce.hpp"

namespace commfuse::ops::cuda {

std::unique_ptr<PlanImpl> plan_all_gather_matmul(AllGatherMatmulProblem p, void* stream);
// op: kMatmulReduceScatterOp (all_reduce false) or kMatmulAllReduceOp.
std::unique_ptr<PlanImpl> plan_matmul_reduce(const char* op, MatmulReduceProblem p, bool all_reduce,
                                             void* stream);
// op: kQuantReduceScatterOp (all_reduce false) or kQuantAllReduceOp; the stream is
// Plan::execute's (the one-shot functions pass theirs there).
std::unique_ptr<PlanImpl> plan_quant_reduce(const char* op, QuantReduceProblem p, bool all_reduce);
std::unique_ptr<PlanImpl> plan_alltoall_matmul(AlltoAllMatmulProblem p, void* stream);
// A16W8 with x2 transposed only (else PARAM_INVALID naming what is missing).
std::unique_ptr<PlanImpl> plan_alltoall_quant_matmul(AlltoAllQuantMatmulProblem p, void* stream);
// AlltoAllQuantMatmulPlan::combination_name of a device plan ("A16W8"); null for another plan.
const char* alltoall_quant_combination(const PlanImpl& plan);

}  // namespace commfuse::ops::cuda
