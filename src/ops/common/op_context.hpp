// What every operator's plan and execute step share: the op's name, the communicator named
// by `group`, and rejections that name the op and the rank (SPEC §0 message format).
#pragma once

#include <commfuse/commfuse.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

#include "comm/call_check.hpp"
#include "comm/comm_impl.hpp"
#include "core/error.hpp"
#include "core/simd.hpp"

namespace commfuse::ops {

class OpContext {
 public:
  // Finds the communicator; a null or unknown group is rejected here (there is no group to
  // abort yet, so only this rank learns of it).
  OpContext(const char* op, std::string_view group);

  const char* op() const { return op_; }
  comm::CommImpl& comm() const { return *comm_; }
  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->world_size(); }

  // Throws "all_gather_matmul(rank 3): <message>"; the plan step's wrapper (plan_or_reject)
  // tells the peers.
  template <typename... Args>
  [[noreturn]] void reject(Status code, Args&&... args) const {
    detail::throw_status(code,
                         detail::cat(op_, "(rank ", rank(), "): ", std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void invalid(Args&&... args) const {
    reject(Status::kParamInvalid, std::forward<Args>(args)...);
  }

 private:
  const char* op_;
  comm::CommImpl* comm_ = nullptr;
};

// Tells the peers of the communicator named `group` (if there is one) that this rank
// rejected its call (CommImpl::tell_rejected): those already inside the call fail it naming
// this rank, and the communicator stays usable. Nothing is sent while another thread of this
// rank is in a call on it. Never throws.
void tell_peers_rejected(std::string_view group, const char* message);
// "op(rank r)" for this rank of group, or "op" where there is no such group.
std::string op_and_rank(const char* op, std::string_view group);
// "op(rank r): why", told to the peers of group (tell_peers_rejected), then thrown as code.
[[noreturn]] void reject_call(const char* op, std::string_view group, int rank, Status code,
                              const std::string& why);

// Whose call a plan is (its op, and this rank of its group): what fails the call on every
// rank (reject_call) once the plan itself is gone, e.g. a C executor already run.
struct CallOwner {
  const char* op = nullptr;
  std::string group;
  int rank = 0;
  [[noreturn]] void reject(Status code, const std::string& why) const {
    reject_call(op, group, rank, code, why);
  }
};

// The plan step of an operator (validation and planning, before anything is sent): any
// error it throws is this rank's rejection of the call, told to the peers before it
// propagates, so that a bad argument on one rank neither hangs the others nor breaks the
// communicator. An error from a lower layer (the GEMM planner's "matmul: ...") gets the
// operator's name and this rank in front, with its status code (SPEC §0: every message names
// the op and the rank).
template <typename F>
auto plan_or_reject(const char* op, std::string_view group, F&& plan) {
  // The plan step's timings (GEMM models) may start the OpenMP pool, whose threads keep the
  // mode they are created in: IEEE defaults, whatever the caller set.
  const simd::StandardFloatMode fp_mode;
  try {
    return plan();
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with(op)) {
      tell_peers_rejected(group, e.what());
      throw;
    }
    const std::string named = detail::cat(op_and_rank(op, group), ": ", e.what());
    tell_peers_rejected(group, named.c_str());
    detail::throw_status(e.code(), named);
  } catch (const std::exception& e) {
    tell_peers_rejected(group, e.what());
    throw;
  }
}

// A call's signature (comm/call_check.hpp): what every rank must pass alike, compared at
// the call's first synchronization so that a mismatch names the argument. The chosen
// algorithm comes last (ranks forcing different ones would run different collectives) and
// prints by its schedule name.
struct SignatureField {
  const char* label;
  int64_t value;
  bool is_dtype = false;
};
template <typename Schedule>
comm::CallSignature call_signature(const char* op, std::initializer_list<SignatureField> fields,
                                   Schedule schedule) {
  comm::CallSignature s;
  s.op = op;
  for (const SignatureField& f : fields)
    f.is_dtype ? s.add_dtype(f.label, static_cast<DType>(f.value)) : s.add(f.label, f.value);
  s.add("algorithm", static_cast<int64_t>(schedule),
        [](int64_t v) { return schedule_name(static_cast<Schedule>(v)); });
  return s;
}

// The matmul operators' (all_gather_matmul, matmul_reduce_scatter, matmul_all_reduce).
template <typename Problem, typename Schedule>
comm::CallSignature matmul_signature(const char* op, const Problem& p, Schedule schedule) {
  return call_signature(op,
                        {{"m (x1 rows)", p.m},
                         {"k (x1 columns)", p.k},
                         {"n (x2 columns)", p.n},
                         {"dtype", static_cast<int64_t>(p.dtype), true},
                         {"comm_turn", p.comm_turn}},
                        schedule);
}

// Every op uses its workspace from a 64-byte boundary, whatever the caller's pointer (it
// must be aligned for float): oneDNN's AMX int8 GEMM ran a 2048x4096x4096 product 36 %
// slower with its source 16 bytes off one (workspaces from std::vector, numpy). A plan
// asks the caller for what it needs plus the slack to reach that boundary.
inline constexpr size_t kWorkspaceAlign = 64;
// What a plan's workspace_size() reports for `needed` bytes used (0 stays 0).
size_t workspace_request(size_t needed);

struct Execution {
  comm::CommImpl& comm;
  void* workspace;  // the caller's, advanced to a 64-byte boundary
};
// What execute checks before it communicates: the communicator named `group` (the plan
// keeps the name, not a pointer, so a plan outliving its communicator fails cleanly with
// PARAM_INVALID) and the workspace (at least workspace_request(needed) bytes, non-null when
// needed > 0, aligned for float; rejected like a plan error).
Execution begin_execute(const char* op, const std::string& group, int planned_rank,
                        int planned_world_size, void* workspace, size_t workspace_bytes,
                        size_t needed);

}  // namespace commfuse::ops
