#include "ops/common/call_workspace.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.hpp"

namespace commfuse::ops {
namespace {

struct Buffer {
  void* data = nullptr;
  size_t capacity = 0;
  bool in_use = false;  // a nested call (none today) gets its own allocation
  ~Buffer() { std::free(data); }
};

thread_local Buffer t_buffer;

void* allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr)
    detail::throw_status(Status::kRuntimeError,
                         detail::cat("out of memory allocating a workspace of ", bytes, " bytes"));
  return p;
}

}  // namespace

CallWorkspace::CallWorkspace(size_t bytes) {
  if (bytes == 0) return;
  Buffer& b = t_buffer;
  if (b.in_use) {
    data_ = allocate(bytes);
#if COMMFUSE_SANITIZED
    std::memset(data_, 0xFF, bytes);
#endif
    return;
  }
  if (bytes > b.capacity) {
    std::free(b.data);
    b.data = nullptr;
    b.capacity = 0;
    b.data = allocate(bytes);
    b.capacity = bytes;
  }
  b.in_use = true;
  data_ = b.data;
#if COMMFUSE_SANITIZED
  // The sanitizer builds check the "never read before written" promise: every call starts
  // from NaN/0xFF bytes, so a read of a stale or unwritten byte breaks the tests' results.
  std::memset(data_, 0xFF, bytes);
#endif
}

CallWorkspace::~CallWorkspace() {
  Buffer& b = t_buffer;
  if (data_ == nullptr) return;
  if (data_ != b.data) {
    std::free(data_);
    return;
  }
  b.in_use = false;
  if (b.capacity > kKeepBytes) {
    std::free(b.data);
    b.data = nullptr;
    b.capacity = 0;
  }
}

void execute_once(Plan& plan) {
  const CallWorkspace workspace(plan.workspace_size());
  plan.execute(workspace.data(), plan.workspace_size());
}

}  // namespace commfuse::ops
