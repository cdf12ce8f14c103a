// How `commfuse demo` times an operator against its unfused composition (and other
// variants), on every rank of comm alike.
//
// Its 8 ranks share the machine's few cores, so one call timed after a barrier mostly
// measured which rank got a core when (the same op measured 0.73-1.17x its composition from
// run to run). Here a sample is a batch of back-to-back calls after a barrier, long enough
// (kDemoSampleMs, from rank 0's warm-up) that the ranks' turns on the cores average out
// within it; the variants take turns going first (the first after a barrier also pays for
// waking the peers); a variant's figure is its median sample divided by the batch.
#pragma once

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace commfuse::cli {

// 4 ms made the 3-5 ms all_gather_matmul bf16 row a batch of one or two calls: 0.51-1.36x
// from run to run (AMD EPYC, 2 cores, 8 ranks); 20 ms read 0.98-1.06x over 6 runs, the demo
// 7 s. (Calls under 20 us still get at most 1000 a batch.)
inline constexpr double kDemoSampleMs = 20.0;

// Milliseconds per call of each variant: the median of `samples` batches.
template <size_t N>
std::array<double, N> time_variants(Comm& comm, int samples,
                                    const std::array<std::function<void()>, N>& variants) {
  using Clock = std::chrono::steady_clock;
  auto batch_ms = [&](const std::function<void()>& f, int32_t calls) {
    comm.barrier();
    const auto t0 = Clock::now();
    for (int32_t c = 0; c < calls; ++c) f();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / calls;
  };
  // A warm-up call of each (a first call may plan, or measure the machine's GEMM model),
  // then one timed call of each sizes the batch: every rank must make the same number of
  // calls, so rank 0's size is everyone's.
  for (const auto& f : variants) batch_ms(f, 1);
  double slowest = 0;
  for (const auto& f : variants) slowest = std::max(slowest, batch_ms(f, 1));
  int32_t calls = static_cast<int32_t>(
      std::clamp(std::ceil(kDemoSampleMs / std::max(slowest, 1e-3)), 1.0, 1000.0));
  comm.broadcast(&calls, 1, DType::kInt32, 0);
  std::array<std::vector<double>, N> ms;
  for (int s = 0; s < samples; ++s)
    for (size_t j = 0; j < N; ++j) {
      const size_t v = (static_cast<size_t>(s) + j) % N;
      ms[v].push_back(batch_ms(variants[v], calls));
    }
  std::array<double, N> median{};
  for (size_t v = 0; v < N; ++v) {
    std::sort(ms[v].begin(), ms[v].end());
    median[v] = ms[v][ms[v].size() / 2];
  }
  return median;
}

}  // namespace commfuse::cli
