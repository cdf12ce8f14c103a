// Timing helpers every bench-worker shares (the ranks run under mpirun, so MPI's clock and
// collectives are at hand): one timed loop between barriers, the median of the rounds, and
// the mean over ranks of a per-rank time.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace commfuse::cli {

// The middle value; for an even count the mean of the two middle ones (v[size / 2] alone
// would report the upper of them, biasing two-round runs towards the slower round).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 != 0 ? v[h] : (v[h - 1] + v[h]) / 2;
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

// time_us after untimed calls of f on every rank (warm_up). The matmul benchmarks' variants take
// turns in each round on buffers of tens of MiB, and a large last-level cache (480 MiB on
// the AMX Xeon) still holds the previous variant's: timed cold, 2-3 calls of a 100 ms op
// measured whichever variant followed one sharing its buffers up to 5 % faster (the same
// unfused composition, in the second slot and in the third: 113 vs 108 ms). Each variant
// is timed warm instead, as a layer called again and again runs.
//
// One untimed call was not always enough: after the float path of alltoall_quant_matmul
// (32 MiB of bf16 x2) the A16W8 decode step (BS 16, H 2048, N 4096, AMX Xeon) took 4.3-4.7
// ms, then 3.6-4.0, 2.3-2.5 and 2.0-2.1 ms; the variant that followed the float path in two
// rounds of three came out 0.92-0.97x of the other where their traces were level (2073 vs
// 2087 us median). So the untimed calls go on until two in a row agree within 10 % on every
// rank (the call is collective: every rank makes as many), at most 5.
inline void warm_up(const std::function<void()>& f) {
  double previous = 0;
  for (int i = 0; i < 5; ++i) {
    const double t0 = MPI_Wtime();
    f();
    const double t = MPI_Wtime() - t0;
    int settled = i > 0 && t <= 1.1 * previous && previous <= 1.1 * t ? 1 : 0;
    int all = 0;
    MPI_Allreduce(&settled, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all != 0) return;
    previous = t;
  }
}

inline double warm_time_us(const std::function<void()>& f, int iters) {
  warm_up(f);
  return time_us(f, iters);
}

// warm_time_us of each variant (null: skipped) in `rounds` rounds, the variants taking turns
// in each; times[v] holds variant v's rounds. The variant that starts a round rotates: a
// variant that follows one thrashing the memory (alltoall_quant_matmul's float path under
// the avx2 cap widens its x2 to 64 MiB of fp32 every call) ran its next calls up to 1.5x
// slower for several calls, a bias a fixed order gives one variant every round.
inline std::vector<std::vector<double>> time_rounds(
    const std::vector<const std::function<void()>*>& variants, int iters, int rounds) {
  const size_t count = variants.size();
  std::vector<std::vector<double>> times(count);
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < count; ++i) {
      const size_t v = (static_cast<size_t>(r) + i) % count;
      if (variants[v] != nullptr && *variants[v])
        times[v].push_back(warm_time_us(*variants[v], iters));
    }
  return times;
}

}  // namespace commfuse::cli
