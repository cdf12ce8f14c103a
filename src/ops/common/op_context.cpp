#include "ops/common/op_context.hpp"

#include <cstdint>

namespace commfuse::ops {

OpContext::OpContext(const char* op, std::string_view group) : op_(op) {
  if (group.data() == nullptr)
    detail::throw_status(Status::kParamNullptr, detail::cat(op, ": group is null"));
  try {
    comm_ = &find_comm(group).impl();
  } catch (const Error& e) {
    detail::throw_status(e.code(), detail::cat(op, ": group: ", e.what()));
  }
}

void tell_peers_rejected(std::string_view group, const char* message) {
  if (group.data() == nullptr) return;
  try {
    find_comm(group).impl().tell_rejected(message);
  } catch (const Error&) {  // no such group: no peers to tell
  }
}

std::string op_and_rank(const char* op, std::string_view group) {
  if (group.data() != nullptr) {
    try {
      return detail::cat(op, "(rank ", find_comm(group).rank(), ")");
    } catch (const Error&) {  // no such group
    }
  }
  return op;
}

void reject_call(const char* op, std::string_view group, int rank, Status code,
                 const std::string& why) {
  const std::string message = detail::cat(op, "(rank ", rank, "): ", why);
  tell_peers_rejected(group, message.c_str());
  detail::throw_status(code, message);
}

namespace {

comm::CommImpl& comm_for_execute(const char* op, const std::string& group, int planned_rank,
                                 int planned_world_size) {
  comm::CommImpl* c = nullptr;
  try {
    c = &find_comm(group).impl();
  } catch (const Error&) {
    detail::throw_status(Status::kParamInvalid,
                         detail::cat(op, "(rank ", planned_rank, "): group '", group,
                                     "' was destroyed after the plan was made"));
  }
  CF_ASSERT(c->rank() == planned_rank && c->world_size() == planned_world_size);
  return *c;
}

void check_workspace(const char* op, comm::CommImpl& c, const void* workspace,
                     size_t workspace_bytes, size_t needed) {
  // The message prefix only on failure: formatting it costs more than a tiny op's execute.
  auto prefix = [&] { return detail::cat(op, "(rank ", c.rank(), "): "); };
  if (workspace_bytes < workspace_request(needed))
    c.reject(Status::kParamInvalid,
             detail::cat(prefix(), "workspaceSize is ", workspace_bytes,
                         " bytes but the plan needs ", workspace_request(needed)));
  if (needed > 0 && workspace == nullptr)
    c.reject(Status::kParamNullptr, detail::cat(prefix(), "workspace is null but the plan needs ",
                                                workspace_request(needed), " bytes"));
  if (reinterpret_cast<uintptr_t>(workspace) % alignof(float) != 0)
    c.reject(Status::kParamInvalid,
             detail::cat(prefix(), "workspace is not ", alignof(float), "-byte aligned"));
}

}  // namespace

size_t workspace_request(size_t needed) {
  return needed == 0 ? 0 : needed + kWorkspaceAlign - alignof(float);
}

Execution begin_execute(const char* op, const std::string& group, int planned_rank,
                        int planned_world_size, void* workspace, size_t workspace_bytes,
                        size_t needed) {
  comm::CommImpl& c = comm_for_execute(op, group, planned_rank, planned_world_size);
  check_workspace(op, c, workspace, workspace_bytes, needed);
  if (needed == 0) return {c, workspace};
  const uintptr_t at = reinterpret_cast<uintptr_t>(workspace);
  const uintptr_t aligned = (at + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  return {c, static_cast<uint8_t*>(workspace) + (aligned - at)};
}

}  // namespace commfuse::ops
