#include "ops/common/call_workspace.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/error.hpp"
#include "ops/common/plan_impl.hpp"

namespace commfuse::ops {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Keeps the mapping's size arithmetic (rounded up, plus a huge page of slack) far from
// overflow; larger requests go to the heap, which refuses them.
constexpr size_t kMaxMapped = size_t{1} << 48;

}  // namespace

// Workspaces of a huge page or more are mapped whole-page (2 MiB-aligned) and offered to
// transparent huge pages (MADV_HUGEPAGE; honoured where THP is "madvise" or "always"): the
// largest part is x2 packed for the GEMM, which reads it in blocks strided over all of it.
// On the AMX Xeon under mpirun, the one-call all_gather_matmul (bf16 2048x4096x4096, W = 2)
// ran its GEMM in 130 ms on a 32 MiB aligned_alloc buffer against 94 ms for the same plan
// executed on the caller's workspace; from huge pages the one-call matches the plan.
// Smaller ones come from the heap, and so does every one in the sanitizer builds, whose
// redzones around heap blocks catch a write past the workspace (a mapping has none).
CallWorkspace::Memory allocate_memory(size_t bytes) {
  CallWorkspace::Memory a;
  if (bytes == 0) return a;
  if (!COMMFUSE_SANITIZED && bytes >= kHugePage && bytes <= kMaxMapped) {
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    const size_t span = rounded + kHugePage;  // room to align the start to a huge page
    void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(p);
      const uintptr_t start = (at + kHugePage - 1) / kHugePage * kHugePage;
      // Unmap the unaligned head and the tail past `rounded`: only the aligned run stays.
      if (start > at) ::munmap(p, start - at);
      if (const size_t tail = at + span - (start + rounded); tail > 0)
        ::munmap(reinterpret_cast<void*>(start + rounded), tail);
      a.data = reinterpret_cast<void*>(start);
      a.mapped = rounded;
      (void)::madvise(a.data, rounded, MADV_HUGEPAGE);  // advice only: no THP is no error
      return a;
    }
  }
  a.data = bytes <= SIZE_MAX - 63 ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr;
  if (a.data == nullptr)
    detail::throw_status(Status::kRuntimeError, detail::cat("out of memory allocating ", bytes,
                                                            " bytes (a workspace or a packed x2)"));
  return a;
}

void release_memory(const CallWorkspace::Memory& a) {
  if (a.mapped != 0)
    ::munmap(a.data, a.mapped);
  else
    std::free(a.data);
}

namespace {

struct Buffer {
  CallWorkspace::Memory memory;
  size_t capacity = 0;
  bool in_use = false;  // a nested call (none today) gets its own allocation
  ~Buffer() { release_memory(memory); }
};

thread_local Buffer t_buffer;

}  // namespace

CallWorkspace::CallWorkspace(size_t bytes) {
  if (bytes == 0) return;
  Buffer& b = t_buffer;
  if (b.in_use) {
    own_ = allocate_memory(bytes);
    data_ = own_.data;
  } else {
    if (bytes > b.capacity) {
      release_memory(b.memory);
      b.memory = {};
      b.capacity = 0;
      b.memory = allocate_memory(bytes);
      // All of a mapping is usable: a slightly larger next call needs no new one.
      b.capacity = b.memory.mapped != 0 ? b.memory.mapped : bytes;
    }
    b.in_use = true;
    data_ = b.memory.data;
  }
#if COMMFUSE_SANITIZED
  // The sanitizer builds check the "never read before written" promise: every call starts
  // from NaN/0xFF bytes, so a read of a stale or unwritten byte breaks the tests' results.
  std::memset(data_, 0xFF, bytes);
#endif
}

CallWorkspace::~CallWorkspace() {
  if (data_ == nullptr) return;
  if (own_.data != nullptr) {
    release_memory(own_);
    return;
  }
  Buffer& b = t_buffer;
  b.in_use = false;
  if (b.capacity > kKeepBytes) {
    release_memory(b.memory);
    b.memory = {};
    b.capacity = 0;
  }
}

void execute_once(Plan& plan, void* stream) {
  std::optional<CallWorkspace> workspace;
  try {
    workspace.emplace(plan.workspace_size());
  } catch (const Error& e) {  // out of memory, on this rank only perhaps: fail the call everywhere
    PlanAccess::impl(plan).reject(e.code(), e.what());
  }
  plan.execute(workspace->data(), plan.workspace_size(), stream);
}

}  // namespace commfuse::ops
