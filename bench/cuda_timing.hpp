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

template <typename F>
double median_ms(F&& f, int iters, int warmup = 3) {
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  for (int i = 0; i < warmup; ++i) f();
  ok(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    ok(cudaEventRecord(a), "record");
    f();
    ok(cudaEventRecord(b), "record");
    ok(cudaEventSynchronize(b), "sync");
    float t = 0;
    ok(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[ms.size() / 2];
}

// The mean of `iters` runs queued back to back between two events: the device's time per
// run. A single run between events also holds the host's time to queue it (the GPU idles
// until the launch arrives): for a 30 us kernel on an H200, about 20 us more.
template <typename F>
double back_to_back_ms(F&& f, int iters, int warmup = 3) {
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  for (int i = 0; i < warmup; ++i) f();
  ok(cudaDeviceSynchronize(), "warm-up");
  ok(cudaEventRecord(a), "record");
  for (int i = 0; i < iters; ++i) f();
  ok(cudaEventRecord(b), "record");
  ok(cudaEventSynchronize(b), "sync");
  float t = 0;
  ok(cudaEventElapsedTime(&t, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return static_cast<double>(t) / iters;
}

}  // namespace cudabench
