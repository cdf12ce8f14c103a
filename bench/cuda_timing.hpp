// What the CUDA benchmarks share: CUDA calls that must succeed, and the time of a piece of
// work on the default stream by CUDA events (after warm-up runs): the median of single runs,
// or the mean of back-to-back runs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cudabench {

inline void ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// Two events around queued work, after `warmup` runs of f; elapsed() waits for the second.
class Span {
 public:
  template <typename F>
  Span(F&& f, int warmup) {
    ok(cudaEventCreate(&a_), "event");
    ok(cudaEventCreate(&b_), "event");
    for (int i = 0; i < warmup; ++i) f();
    ok(cudaDeviceSynchronize(), "warm-up");
  }
  ~Span() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  void start() { ok(cudaEventRecord(a_), "record"); }
  float elapsed_ms() {
    ok(cudaEventRecord(b_), "record");
    ok(cudaEventSynchronize(b_), "sync");
    float t = 0;
    ok(cudaEventElapsedTime(&t, a_, b_), "elapsed");
    return t;
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

template <typename F>
double median_ms(F&& f, int iters, int warmup = 3) {
  Span span(f, warmup);
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    span.start();
    f();
    ms.push_back(span.elapsed_ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The mean of `iters` runs queued back to back between two events: the device's time per
// run. A single run between events also holds the host's time to queue it (the GPU idles
// until the launch arrives): for a 30 us kernel on an H200, about 20 us more.
template <typename F>
double back_to_back_ms(F&& f, int iters, int warmup = 3) {
  Span span(f, warmup);
  span.start();
  for (int i = 0; i < iters; ++i) f();
  return static_cast<double>(span.elapsed_ms()) / iters;
}

}  // namespace cudabench
