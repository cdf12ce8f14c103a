// How the machine models (half_gemm_model.cpp, f32_gemm_model.cpp) time a probe: the best of
// `runs` runs after one warm-up run (first touch of buffers, JIT caches, a library's own
// buffers), in ns, never below 1 so that rates stay finite.
#pragma once

#include <algorithm>
#include <chrono>

namespace commfuse::kernels::cpu {

template <typename F>
double best_probe_ns(F&& f, int runs) {
  f();
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return std::max(best, 1.0);
}

}  // namespace commfuse::kernels::cpu
