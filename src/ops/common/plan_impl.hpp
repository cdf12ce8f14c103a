// What commfuse::Plan (the one public plan type, include/commfuse/commfuse.hpp) holds: an
// op's planned call behind four virtual functions. Each op supplies, for its plan data
// (which has problem, schedule, signature and usually workspace_bytes):
//   std::string describe(const Data&)            the COMMFUSE_VERBOSE / description() line
//   const char* schedule_name(Schedule)          the chosen algorithm's name
//   void run_schedule(const Data&, comm::CommImpl&, void* workspace)   the switch over its
//                                                schedules (device plans, whose Data has a
//                                                `stream`: run_schedule(d, c, ws, stream))
// (and plan_workspace_bytes / plan_schedule_name overloads where the defaults below do not
// fit), and its public class only a constructor that plans and calls make_plan.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "comm/call_check.hpp"
#include "core/log.hpp"
#include "core/simd.hpp"
#include "ops/common/op_context.hpp"

namespace commfuse::ops {

class PlanImpl {
 public:
  virtual ~PlanImpl() = default;
  virtual size_t workspace_size() const = 0;  // what the caller allocates (alignment slack)
  virtual const char* schedule_name() const = 0;
  virtual std::string description() const = 0;
  // stream: a device plan's cudaStream_t for this call (null: the plan's own); host plans
  // ignore it.
  virtual void execute(void* workspace, size_t workspace_bytes, void* stream) const = 0;
  // Fails the planned call on every rank: the peers fail it naming this rank (the
  // communicator stays usable) and this rank throws code with `why`, prefixed with the op
  // and rank. For what goes wrong on one rank between plan and execute: the one-call
  // functions' workspace allocation.
  [[noreturn]] void reject(Status code, const std::string& why) const { owner().reject(code, why); }
  virtual CallOwner owner() const = 0;
};

// What the library (not its users) reaches inside a commfuse::Plan.
struct PlanAccess {
  static const PlanImpl& impl(const Plan& plan) { return plan.impl(); }
};

// The defaults: the plan's workspace_bytes and its schedule's name.
template <typename Data>
size_t plan_workspace_bytes(const Data& d) {
  return d.workspace_bytes;
}
template <typename Data>
const char* plan_schedule_name(const Data& d) {
  return schedule_name(d.schedule);
}

// Every op's execute: the group and the workspace checked (begin_execute), the call's
// signature in scope for its collectives, then its schedule. A plan whose signature has a
// field only the call's data says (data_field >= 0: call_field_value(problem), e.g. a digest
// of the bias every rank must pass alike) runs with a copy that has it set.
template <typename Data>
void execute_plan(const Data& d, void* workspace, size_t workspace_bytes, void* stream) {
  const auto& p = d.problem;
  const auto [c, ws] = begin_execute(d.signature.op, p.group, p.rank, p.world_size, workspace,
                                     workspace_bytes, plan_workspace_bytes(d));
  auto run = [&, c = &c, ws = ws](const comm::CallSignature& signature) {
    const comm::CommImpl::Entered entered(*c, d.signature.op);
    const comm::CallScope call(signature);
    // SPEC's fp32 arithmetic rounds to nearest even, on every rank alike, whatever mode the
    // calling thread set.
    const simd::StandardFloatMode fp_mode;
    if constexpr (requires { d.stream; })
      run_schedule(d, *c, ws, stream != nullptr ? stream : d.stream);
    else
      run_schedule(d, *c, ws);
  };
  if constexpr (requires { d.data_field; }) {
    if (d.data_field >= 0) {
      comm::CallSignature s = d.signature;
      s.values[d.data_field] = call_field_value(p);
      return run(s);
    }
  }
  run(d.signature);
}

template <typename Data>
class OpPlan final : public PlanImpl {
 public:
  explicit OpPlan(Data data) : data_(std::move(data)) {}
  size_t workspace_size() const override { return workspace_request(plan_workspace_bytes(data_)); }
  const char* schedule_name() const override { return plan_schedule_name(data_); }
  std::string description() const override { return describe(data_); }
  void execute(void* workspace, size_t workspace_bytes, void* stream) const override {
    execute_plan(data_, workspace, workspace_bytes, stream);
  }
  CallOwner owner() const override {
    return {data_.signature.op, data_.problem.group, data_.problem.rank};
  }
  const Data& data() const { return data_; }

 private:
  Data data_;
};

// The plan the public constructor hands to commfuse::Plan; its description is printed here
// under COMMFUSE_VERBOSE=1 (built only then: describing costs more than a tiny op itself).
template <typename Data>
std::unique_ptr<PlanImpl> make_plan(Data data) {
  auto plan = std::make_unique<OpPlan<Data>>(std::move(data));
  if (log::verbose_level() >= 1) log::verbose(plan->description());
  return plan;
}

}  // namespace commfuse::ops
