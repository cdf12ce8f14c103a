#include "comm/shm/sync_probe.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "comm/shm/shm_transport.hpp"

namespace commfuse::comm::shm {
namespace {

using clock = std::chrono::steady_clock;

constexpr uint32_t kReady = 0xfffffff0u;  // rank 1 is echoing
constexpr uint32_t kDone = 0xfffffff1u;   // rank 0 has finished: rank 1 stops
constexpr int kTrips = 100, kRuns = 5;

// The first word of a rank's first slot: scratch until the transport's first step.
std::atomic<uint32_t>& word(const Segment& s) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return *reinterpret_cast<std::atomic<uint32_t>*>(static_cast<uint8_t*>(s.data()) + kControlBytes);
}

}  // namespace

double measure_rank_sync_us(int rank, const std::vector<Segment>& segments) {
  if (segments.size() < 2 || rank > 1) return -1;
  std::atomic<uint32_t>& mine = word(segments[rank]);
  std::atomic<uint32_t>& peer = word(segments[1 - rank]);
  if (rank == 1) {  // echo every odd value rank 0 writes, until it is done or 100 ms pass
    mine.store(kReady, std::memory_order_release);
    const auto deadline = clock::now() + std::chrono::milliseconds(100);
    for (uint32_t echoed = 0; clock::now() < deadline;) {
      const uint32_t v = peer.load(std::memory_order_acquire);
      if (v == kDone) break;
      if ((v & 1u) && v != echoed && v < kReady) {
        mine.store(v + 1, std::memory_order_release);
        echoed = v;
      }
    }
    return -1;
  }
  // Rank 0: wait for rank 1 (up to 20 ms), then runs of round trips, each given 2 ms; a run
  // that misses it (the two spinning on one core) is not counted.
  double best = -1;
  auto deadline = clock::now() + std::chrono::milliseconds(20);
  while (peer.load(std::memory_order_acquire) != kReady && clock::now() < deadline) {
  }
  if (peer.load(std::memory_order_acquire) == kReady) {
    uint32_t next = 1;
    for (int run = 0; run < kRuns; ++run) {
      const auto t0 = clock::now();
      deadline = t0 + std::chrono::milliseconds(2);
      bool ok = true;
      for (int i = 0; i < kTrips && ok; ++i, next += 2) {
        mine.store(next, std::memory_order_release);
        while (ok && peer.load(std::memory_order_acquire) != next + 1) ok = clock::now() < deadline;
      }
      if (!ok) continue;  // rank 1 may still echo the last value: next run's values differ
      const double us =
          std::chrono::duration<double, std::micro>(clock::now() - t0).count() / (2 * kTrips);
      best = best < 0 ? us : std::min(best, us);
    }
  }
  mine.store(kDone, std::memory_order_release);
  return best;
}

}  // namespace commfuse::comm::shm
