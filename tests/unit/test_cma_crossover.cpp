// The CMA crossover (comm/shm/cma.hpp) and the rank synchronization probe it is fed with
// (comm/shm/sync_probe.hpp): what they return must be usable on any machine, measured or not.
#include <gtest/gtest.h>

#include <chrono>
#include <iterator>
#include <thread>
#include <vector>

#include "comm/shm/cma.hpp"
#include "comm/shm/segment.hpp"
#include "comm/shm/shm_transport.hpp"
#include "comm/shm/sync_probe.hpp"

namespace {

using namespace commfuse::comm::shm;

bool power_of_two_in_range(uint64_t b) {
  return b >= 4096 && b <= (uint64_t{4} << 20) && (b & (b - 1)) == 0;
}

TEST(CmaCrossover, IsAPowerOfTwoInRangeAndGrowsWithTheSynchronizationCost) {
  uint64_t last = 0;
  for (double sync_us : {0.0, 0.1, 0.5, 2.0, 10.0, 1000.0}) {
    const uint64_t b = cma_crossover_bytes(false, sync_us);
    EXPECT_TRUE(power_of_two_in_range(b)) << sync_us << " us: " << b;
    EXPECT_GE(b, last) << sync_us << " us";
    last = b;
  }
  // Unknown (negative) is the 2 us estimate; sharing cores costs a context switch.
  EXPECT_EQ(cma_crossover_bytes(false, -1), cma_crossover_bytes(false, 2.0));
  EXPECT_GE(cma_crossover_bytes(true, -1), cma_crossover_bytes(false, 2.0));
  EXPECT_TRUE(power_of_two_in_range(cma_crossover_bytes(true, -1)));
  EXPECT_GT(cma_syscall_us(), 0.0);
}

// Where ranks share cores the group times its collectives' two algorithms at each probe
// size (shm_crossover.cpp): the second from the size where taking it loses least in total
// (time taken over the better time, summed over the sizes), never where the first
// everywhere loses least.
TEST(SharedCores, TakeTheCrossoverThatLosesLeastOverTheProbedSizes) {
  static_assert(std::size(kSharedCoreA2aBytes) == 4);
  const uint64_t* sizes = kSharedCoreA2aBytes;
  const uint64_t never = uint64_t{4} << 20;
  const double first[] = {10, 40, 80, 160};
  const double all_faster[] = {9, 39, 79, 159};
  EXPECT_EQ(best_crossover_size(sizes, first, all_faster, 4, never), sizes[0]);
  const double from_third[] = {20, 50, 80, 100};  // a tie counts for the second
  EXPECT_EQ(best_crossover_size(sizes, first, from_third, 4, never), sizes[2]);
  // Faster at 128 KiB by a third, slower at 256 KiB by an eighth: from 128 KiB.
  const double not_monotone[] = {20, 30, 90, 100};
  EXPECT_EQ(best_crossover_size(sizes, first, not_monotone, 4, never), sizes[1]);
  // A narrow loss at the largest size does not throw away the wins below it.
  const double slower_last[] = {20, 30, 70, 170};
  EXPECT_EQ(best_crossover_size(sizes, first, slower_last, 4, never), sizes[1]);
  // Timed by a W = 3 group on 2 cores (slots / CMA, us), where the older rule said never.
  const double slots[] = {36.7, 101.3, 221.7, 656.0}, cma[] = {41.8, 80.8, 148.1, 664.0};
  EXPECT_EQ(best_crossover_size(sizes, slots, cma, 4, never), sizes[1]);
  // Clearly slower from the second size on: never, despite the win at the smallest.
  const double slower[] = {9, 50, 120, 300};
  EXPECT_EQ(best_crossover_size(sizes, first, slower, 4, never), never);
  // Only the sizes probed count (all_reduce probes those its slot allows).
  EXPECT_EQ(best_crossover_size(sizes, first, slower, 1, never), sizes[0]);
  for (uint64_t b : kSharedCoreA2aBytes) EXPECT_TRUE(power_of_two_in_range(b)) << b;
  for (size_t i = 1; i < std::size(kSharedCoreAllReduceBytes); ++i)
    EXPECT_LT(kSharedCoreAllReduceBytes[i - 1], kSharedCoreAllReduceBytes[i]);
}

// Where the slots won at every probed size, all_to_all turns to CMA where the group's slot
// copies (source, destination and slot of every rank) outgrow the last-level cache: later
// with a larger cache, sooner with more ranks, never at or under a probed size, at most 4 MiB.
TEST(SharedCores, SlotsSpillWhereTheGroupsCopiesOutgrowTheCache) {
  constexpr uint64_t MiB = uint64_t{1} << 20;
  const uint64_t largest_probe = kSharedCoreA2aBytes[std::size(kSharedCoreA2aBytes) - 1];
  // 32 MiB: W = 4 from 2 MiB saved (3 x 4 x 2 MiB x 4/3 = 32 MiB), W = 8 from 32 x 7/192 MiB.
  EXPECT_EQ(slots_spill_bytes(4, 32 * MiB), 2 * MiB);
  EXPECT_EQ(slots_spill_bytes(8, 32 * MiB), 32 * MiB * 7 / 192);
  EXPECT_LT(slots_spill_bytes(8, 32 * MiB), slots_spill_bytes(4, 32 * MiB));
  EXPECT_LT(slots_spill_bytes(3, 16 * MiB), slots_spill_bytes(3, 32 * MiB));
  for (int w : {2, 3, 4, 8, 64})
    for (uint64_t llc : {uint64_t{0}, MiB, 32 * MiB, 1024 * MiB}) {
      const uint64_t b = slots_spill_bytes(w, llc);
      EXPECT_GT(b, largest_probe) << w << " ranks, " << llc;
      EXPECT_LE(b, 4 * MiB) << w << " ranks, " << llc;
    }
  EXPECT_EQ(slots_spill_bytes(4, 0), 4 * MiB);  // unknown cache: the old fixed size
}

// Two "ranks" as two threads over two real segments: rank 0 gets a positive time (or -1 if
// the threads never ran on two cores at once), rank 1 returns -1, both within their bounds,
// and ranks past 1 do not take part.
TEST(RankSyncProbe, RankZeroMeasuresAndBothReturnInTime) {
  std::vector<Segment> segs;
  for (int r = 0; r < 2; ++r) segs.push_back(Segment::create(region_bytes(4096)));
  double r0 = 0, r1 = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread one([&] { r1 = measure_rank_sync_us(1, segs); });
  r0 = measure_rank_sync_us(0, segs);
  one.join();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r1, -1);
  EXPECT_TRUE(r0 == -1 || (r0 > 0 && r0 < 1000)) << r0;
  EXPECT_LT(ms, 500) << "the probe is bounded (50 ms rank 0, 100 ms rank 1)";
  EXPECT_EQ(measure_rank_sync_us(2, segs), -1);
  // Rank 0 alone (rank 1 never comes): gives up, saying it could not measure.
  std::vector<Segment> alone;
  for (int r = 0; r < 2; ++r) alone.push_back(Segment::create(region_bytes(4096)));
  EXPECT_EQ(measure_rank_sync_us(0, alone), -1);
}

}  // namespace
