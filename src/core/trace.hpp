// COMMFUSE_TRACE=file: a Chrome-trace (Trace Event Format) timeline of what each rank did —
// every piece's pack (copy or GEMM into the slot), wait for a peer, and compute — so the
// overlap of communication and GEMM can be seen. Open the file in https://ui.perfetto.dev
// or chrome://tracing: one process track per rank. Every process of a job appends its
// events to the same file (flock; the first writer opens the JSON array, whose closing
// bracket the format makes optional), so delete an old file first (`commfuse bench --trace`
// does). Off (one branch per span) unless the variable is set.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace commfuse::trace {

namespace detail {
// -1 until the first check reads COMMFUSE_TRACE, then 0 (off) or 1 (on): with tracing off,
// every span costs one load and one branch, inline (a fused call opens a dozen spans, and
// an out-of-line check was ~80 of the ~1,400 instructions it spends beyond the unfused
// composition at 1 row a rank).
inline std::atomic<int8_t> g_file_state{-1};
bool enabled_slow();
}  // namespace detail

// The file is set and this thread records (not inside a Pause).
inline bool enabled() {
  return detail::g_file_state.load(std::memory_order_relaxed) != 0 && detail::enabled_slow();
}
// Why tracing could not write `path` ("" where it can), without leaving anything behind: an
// existing file or device must be writable and not a kernel file (/proc, /sys); a FIFO is
// refused (every tracer would wait for a reader at exit), as is a symbolic link to nothing;
// for a new file, a file of this process's own is made in its directory and removed again.
// Checked where a communicator is created and by `commfuse info` and `commfuse bench`
// (tracing itself, which may not throw, warns and stops).
std::string path_problem(const std::string& path);

// The track this process's events go to (the rank); set by the communicator.
void set_rank(int rank);
// Writes the buffered events now (also done at exit and whenever the buffer fills).
void flush();

// While one lives, this thread records nothing: work that is not the user's (a
// communicator timing its own collectives at set-up) stays out of the user's timeline.
class Pause {
 public:
  Pause();
  ~Pause();
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

 private:
  bool outer_;
};

// A complete event ("ph":"X") from construction to destruction. name and cat must be
// string literals (stored as pointers); arg is shown as args.peer when >= 0.
class Span {
 public:
  Span(const char* name, const char* cat, int64_t peer = -1, uint64_t bytes = 0)
      : name_(name), cat_(cat), peer_(peer), bytes_(bytes), start_ns_(enabled() ? now_ns() : 0) {}
  ~Span() {
    if (start_ns_ != 0) record(name_, cat_, peer_, bytes_, start_ns_, now_ns());
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  static uint64_t now_ns();
  static void record(const char* name, const char* cat, int64_t peer, uint64_t bytes,
                     uint64_t start_ns, uint64_t end_ns);
  const char* name_;
  const char* cat_;
  int64_t peer_;
  uint64_t bytes_;
  uint64_t start_ns_;
};

}  // namespace commfuse::trace
