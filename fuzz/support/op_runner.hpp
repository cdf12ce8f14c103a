// What every operator target does with its decoded call (fuzz/README.md, "Properties"):
// plan; on a rejection check the status, the message, untouched outputs and a usable
// communicator; on success execute twice from differently poisoned outputs and workspaces
// and require the same output bits (no unwritten output element, no read of unwritten
// workspace) with the inputs unchanged.
#pragma once

#include <commfuse/commfuse.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "support/tensor_arg.hpp"

namespace commfuse_fuzz {

using PlanFn =
    std::function<commfuseStatus_t(uint64_t* workspace_size, commfuseOpExecutor_t** executor)>;
using ExecuteFn = commfuseStatus_t (*)(void* workspace, uint64_t workspace_size,
                                       commfuseOpExecutor_t* executor, void* stream);

struct OpCall {
  const char* plan_fn = nullptr;  // "commfuseAllGatherMatmulGetWorkspaceSize"
  const char* execute_fn = nullptr;
  const char* op = nullptr;         // SPEC's name, which every message of the op carries
  std::vector<TensorArg*> tensors;  // every tensor argument, inputs and outputs
  int64_t work = 0;                 // multiply-adds (or elements) of one execution: caps its time
  PlanFn plan;
  ExecuteFn execute = nullptr;
};

// Executions are skipped above these (one stays around a millisecond under ASan).
constexpr int64_t kMaxExecuteElements = int64_t{1} << 16;  // all tensors together
constexpr int64_t kMaxExecuteWork = int64_t{1} << 20;
constexpr uint64_t kMaxWorkspaceBytes = uint64_t{64} << 20;

// call_flags (the input's first byte): bits 0-1 pick a bad first execution (1: one
// workspace byte too few, 2: a null workspace, 3: a misaligned one) that must be rejected;
// 0xF1 / 0xF2 / 0xF3 pass a null workspaceSize / executor / both pointers to the plan
// (rare under random bytes, as these calls stop before anything else is checked).
void run_op(const OpCall& call, uint8_t call_flags);

// The work estimate of a matmul: x1's elements times x2's larger dim (n whichever way x2
// is laid out), saturating.
int64_t matmul_work(const TensorArg& x1, const TensorArg& x2);

}  // namespace commfuse_fuzz
