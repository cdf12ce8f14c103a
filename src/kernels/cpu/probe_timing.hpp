// How the machine models (half_gemm_model.cpp, f32_gemm_model.cpp, int_matmul.cpp) and the
// copies' distance probes (copy.cpp, comm/shm/cma.cpp) time a probe: the best of `runs`
// runs after one warm-up run (first touch of buffers, JIT caches, a library's own buffers),
// in ns, never below 1 so that rates stay finite.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>

#include "kernels/cpu/threads.hpp"

namespace commfuse::kernels::cpu {

// The clock a probe reads: with one compute thread (the kernels then run on the calling
// thread) this thread's CPU time, which stops while the thread waits for a core; else the
// wall clock, which sees every thread's work. Ranks that outnumber the cores all probe at
// their first GEMM and preempt each other: on the wall clock each timed the others' probes
// too, and ranks decided differently (8 ranks on the 2-core AMX Xeon: 2-3 of 8 chose OpenBLAS
// for a 128x512x64 fp32 GEMM that it ran 15-30 % slower than oneDNN, alone and in the op).
inline double probe_clock_ns(bool thread_clock) {
  if (thread_clock) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// On the given clock (probe_clock_ns): for a probe that runs on the calling thread alone
// (the copies' distance probes, kernels/cpu/copy.hpp), this thread's CPU time always.
template <typename F>
double best_probe_ns(F&& f, int runs, bool thread_clock) {
  f();
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const double t0 = probe_clock_ns(thread_clock);
    f();
    best = std::min(best, probe_clock_ns(thread_clock) - t0);
  }
  return std::max(best, 1.0);
}

// The machine models' GEMM probes: this thread's CPU time where the kernels run on it (one
// compute thread), else the wall clock.
template <typename F>
double best_probe_ns(F&& f, int runs) {
  return best_probe_ns(f, runs, compute_threads() == 1);
}

}  // namespace commfuse::kernels::cpu
