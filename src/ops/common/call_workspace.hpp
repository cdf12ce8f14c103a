// Workspace of the one-shot entry points (commfuse::all_gather_matmul(...), and so every
// Python call): one buffer per calling thread, grown when a call needs more and reused by
// the next call, never zeroed — the schedules write every workspace byte they read. A fresh
// zero-filled vector per call cost a memset of the whole workspace (the widened fp32 x2 is
// 64 MiB at k = n = 4096) on every call. Buffers above kKeepBytes are freed after the call,
// so one huge call does not pin its memory for the thread's life.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>

namespace commfuse::ops {

// The one-shot entry points' execute: the plan run once on this thread's workspace (a device
// plan on `stream`, or on its own when null).
void execute_once(Plan& plan, void* stream = nullptr);

class CallWorkspace {
 public:
  static constexpr size_t kKeepBytes = size_t{256} << 20;

  // Its memory: from the heap, or (mapped != 0) a whole-page mapping of that many bytes.
  struct Memory {
    void* data = nullptr;
    size_t mapped = 0;
  };

  // 64-byte aligned (2 MiB-aligned huge-page candidates from 2 MiB, outside sanitizer
  // builds); null when bytes == 0.
  explicit CallWorkspace(size_t bytes);
  ~CallWorkspace();
  CallWorkspace(const CallWorkspace&) = delete;
  CallWorkspace& operator=(const CallWorkspace&) = delete;

  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  Memory own_;  // a nested call's own allocation (the thread's buffer was in use)
};

// The memory of a CallWorkspace, for other large buffers read by the GEMMs (PackedWeight):
// 64-byte aligned; from 2 MiB up (outside sanitizer builds) whole 2 MiB pages offered to
// transparent huge pages. RUNTIME_ERROR when there is none; null when bytes == 0.
CallWorkspace::Memory allocate_memory(size_t bytes);
void release_memory(const CallWorkspace::Memory& m);

}  // namespace commfuse::ops
