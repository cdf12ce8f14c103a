#include "support/op_runner.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "support/check.hpp"
#include "support/fuzz_comm.hpp"

namespace commfuse_fuzz {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// A workspace of `bytes` (64-byte aligned) filled with `poison`.
std::unique_ptr<uint8_t, FreeDeleter> workspace(uint64_t bytes, uint8_t poison) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 64) / 64 * 64));
  FUZZ_REQUIRE(p != nullptr, "harness: no memory for a %llu-byte workspace",
               static_cast<unsigned long long>(bytes));
  std::memset(p, poison, bytes + 1);
  return std::unique_ptr<uint8_t, FreeDeleter>(p);
}

void require_outputs_untouched(const OpCall& call, const char* after) {
  for (const TensorArg* t : call.tensors)
    if (t->role() == Role::kOutput)
      FUZZ_REQUIRE(t->all_bytes(TensorArg::kUntouched), "%s wrote an output after %s", call.op,
                   after);
}

void require_inputs_unchanged(const OpCall& call) {
  for (const TensorArg* t : call.tensors)
    if (t->role() == Role::kInput)
      FUZZ_REQUIRE(t->unchanged(), "%s wrote into an input tensor", call.op);
}

// The same call planned again: it must succeed again with the same workspace size.
commfuseOpExecutor_t* plan_again(const OpCall& call, uint64_t ws) {
  uint64_t again = 0;
  commfuseOpExecutor_t* e = nullptr;
  const commfuseStatus_t st = call.plan(&again, &e);
  FUZZ_REQUIRE(st == COMMFUSE_SUCCESS && e != nullptr, "%s: a repeated plan failed (%d): %s",
               call.plan_fn, static_cast<int>(st), commfuseGetLastErrorMessage());
  FUZZ_REQUIRE(again == ws, "%s: the same call planned twice needs %llu then %llu bytes",
               call.plan_fn, static_cast<unsigned long long>(ws),
               static_cast<unsigned long long>(again));
  return e;
}

bool executable(const OpCall& call, uint64_t ws) {
  int64_t elements = 0;
  for (const TensorArg* t : call.tensors) {
    if (!t->backed()) return false;
    elements += std::min(t->numel(), kMaxExecuteElements + 1);
  }
  return elements <= kMaxExecuteElements && call.work <= kMaxExecuteWork &&
         ws <= kMaxWorkspaceBytes;
}

// A first execution with a bad workspace: rejected, executor consumed, nothing written.
void execute_bad_workspace(const OpCall& call, int kind, uint64_t ws, commfuseOpExecutor_t* e) {
  auto buf = workspace(ws, 0xA5);
  const commfuseStatus_t want = kind == 2 ? COMMFUSE_PARAM_NULLPTR : COMMFUSE_PARAM_INVALID;
  void* ptr = kind == 2 ? nullptr : kind == 3 ? buf.get() + 1 : buf.get();
  const uint64_t size = kind == 1 ? ws - 1 : ws;
  const commfuseStatus_t st = call.execute(ptr, size, e, nullptr);
  check_named_failure(call.execute_fn, st, call.op, call.execute_fn);
  FUZZ_REQUIRE(st == want, "%s with a bad workspace (kind %d, %llu bytes needed) returned %d: %s",
               call.execute_fn, kind, static_cast<unsigned long long>(ws), static_cast<int>(st),
               commfuseGetLastErrorMessage());
  require_outputs_untouched(call, "a rejected execution");
  require_comm_usable("a rejected execution");
}

// One execution from outputs and workspace poisoned with `poison`; the outputs' elements.
std::vector<std::vector<uint8_t>> execute(const OpCall& call, uint8_t poison, uint64_t ws,
                                          commfuseOpExecutor_t* e) {
  for (TensorArg* t : call.tensors)
    if (t->role() == Role::kOutput) t->fill(poison);
  auto buf = workspace(ws, poison);
  const commfuseStatus_t st = call.execute(ws ? buf.get() : nullptr, ws, e, nullptr);
  check_status(call.execute_fn, st);
  FUZZ_REQUIRE(st == COMMFUSE_SUCCESS, "%s failed after a successful plan (%d): %s",
               call.execute_fn, static_cast<int>(st), commfuseGetLastErrorMessage());
  FUZZ_REQUIRE(buf.get()[ws] == poison, "%s wrote past the end of its %llu-byte workspace",
               call.execute_fn, static_cast<unsigned long long>(ws));
  require_inputs_unchanged(call);
  std::vector<std::vector<uint8_t>> out;
  for (const TensorArg* t : call.tensors)
    if (t->role() == Role::kOutput) out.push_back(t->elements());
  return out;
}

}  // namespace

void run_op(const OpCall& call, uint8_t call_flags) {
  const bool null_ws = (call_flags & 0xF1) == 0xF1, null_exec = (call_flags & 0xF2) == 0xF2;
  uint64_t ws = 0;
  commfuseOpExecutor_t* e = nullptr;
  const commfuseStatus_t st = call.plan(null_ws ? nullptr : &ws, null_exec ? nullptr : &e);
  // For tuning seeds: what the plan said, and whether the call is small enough to execute.
  static const bool verbose = std::getenv("COMMFUSE_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "%s: plan %d%s %s\n", call.op, static_cast<int>(st),
                 st == COMMFUSE_SUCCESS && executable(call, ws) ? " (executes)" : "",
                 st == COMMFUSE_SUCCESS ? "" : commfuseGetLastErrorMessage());
  check_named_failure(call.plan_fn, st, call.op, call.plan_fn);
  // At W = 1 on a healthy communicator nothing but the arguments can fail a plan.
  FUZZ_REQUIRE(st != COMMFUSE_RUNTIME_ERROR, "%s returned RUNTIME_ERROR: %s", call.plan_fn,
               commfuseGetLastErrorMessage());
  if (null_ws || null_exec)
    FUZZ_REQUIRE(st == COMMFUSE_PARAM_NULLPTR, "%s with a null %s returned %d: %s", call.plan_fn,
                 null_ws ? "workspaceSize" : "executor", static_cast<int>(st),
                 commfuseGetLastErrorMessage());
  if (st != COMMFUSE_SUCCESS) {
    FUZZ_REQUIRE(e == nullptr, "%s failed but returned an executor", call.plan_fn);
    require_outputs_untouched(call, "a rejected plan");
    require_comm_usable("a rejected plan");
    return;
  }
  FUZZ_REQUIRE(e != nullptr, "%s succeeded without an executor", call.plan_fn);
  if (!executable(call, ws)) {
    FUZZ_REQUIRE(commfuseDestroyOpExecutor(e) == COMMFUSE_SUCCESS, "commfuseDestroyOpExecutor: %s",
                 commfuseGetLastErrorMessage());
    return;
  }
  // Each execution consumes its executor; the later ones plan the call again.
  if (const int bad = call_flags & 3; bad != 0 && ws > 0) {
    execute_bad_workspace(call, bad, ws, e);
    e = plan_again(call, ws);
  }
  const auto first = execute(call, 0xA5, ws, e);
  const auto second = execute(call, 0x5A, ws, plan_again(call, ws));
  for (size_t i = 0; i < first.size(); ++i)
    FUZZ_REQUIRE(first[i] == second[i],
                 "%s: output %zu differs between two runs from differently poisoned outputs and "
                 "workspace (an element left unwritten, or unwritten workspace read)",
                 call.op, i);
  require_comm_usable("an execution");
}

int64_t matmul_work(const TensorArg& x1, const TensorArg& x2) {
  const __int128 w = static_cast<__int128>(x1.numel()) * std::max(x2.dim(0), x2.dim(1));
  return w > INT64_MAX ? INT64_MAX : static_cast<int64_t>(w);
}

}  // namespace commfuse_fuzz
