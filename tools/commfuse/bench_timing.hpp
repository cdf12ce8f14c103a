// Timing helpers every bench-worker shares (the ranks run under mpirun, so MPI's clock and
// collectives are at hand): one timed loop between barriers, the median of the rounds, and
// the mean over ranks of a per-rank time.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace commfuse::cli {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Mean over the R ranks of MPI_COMM_WORLD of a per-rank value.
inline double mean_over_ranks(double v, int R) {
  double sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / R;
}

// Microseconds per call of f over iters calls, starting together on every rank.
inline double time_us(const std::function<void()>& f, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) f();
  return (MPI_Wtime() - t0) * 1e6 / iters;
}

// time_us after one untimed call of f on every rank. The matmul benchmarks' variants take
// turns in each round on buffers of tens of MiB, and a large last-level cache (480 MiB on
// the AMX Xeon) still holds the previous variant's: timed cold, 2-3 calls of a 100 ms op
// measured whichever variant followed one sharing its buffers up to 5 % faster (the same
// unfused composition, in the second slot and in the third: 113 vs 108 ms). Each variant
// is timed warm instead, as a layer called again and again runs.
inline double warm_time_us(const std::function<void()>& f, int iters) {
  f();
  return time_us(f, iters);
}

}  // namespace commfuse::cli
