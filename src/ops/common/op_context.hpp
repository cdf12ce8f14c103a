// What every operator's plan and execute step share: the op's name, the communicator named
// by `group`, and rejections that name the op and the rank (SPEC §0 message format).
#pragma once

#include <commfuse/commfuse.hpp>

#include <string>
#include <string_view>

#include "comm/comm_impl.hpp"
#include "core/error.hpp"

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

  // "all_gather_matmul(rank 3): <message>", and the group is aborted (CommImpl::reject) so
  // that peers already inside the op fail at once naming this rank instead of hanging.
  template <typename... Args>
  [[noreturn]] void reject(Status code, Args&&... args) const {
    comm_->reject(code, detail::cat(op_, "(rank ", rank(), "): ", std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void invalid(Args&&... args) const {
    reject(Status::kParamInvalid, std::forward<Args>(args)...);
  }

 private:
  const char* op_;
  comm::CommImpl* comm_ = nullptr;
};

// The transport of the communicator named `group` at execute time. The plan keeps the name,
// not a pointer, so a plan outliving its communicator fails cleanly (PARAM_INVALID).
comm::CommImpl& comm_for_execute(const char* op, const std::string& group, int planned_rank,
                                 int planned_world_size);

// Workspace handed to execute: at least `needed` bytes, non-null when needed > 0, aligned
// for float. Rejected before any communication, aborting the group like a plan error.
void check_workspace(const char* op, comm::CommImpl& c, const void* workspace,
                     size_t workspace_bytes, size_t needed);

}  // namespace commfuse::ops
