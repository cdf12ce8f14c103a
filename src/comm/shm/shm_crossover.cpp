// The CMA crossover of a group whose ranks share cores, measured on the group itself
// (shm_transport.hpp: measure_shared_core_crossover). With a core per rank the crossover
// follows from the costs CMA adds (cma.hpp: one system call and one synchronization, both
// measured); where ranks share cores a wait lasts until the peer it waits for gets a core,
// which no probe of two ranks predicts: the AMX Xeon at W = 3, 4 and 8 on 2 cores measured
// all_to_all crossing over at 87-112 KiB saved per rank, where the context-switch estimate
// the model used (20 us x the copy rate) gave 512 KiB (W = 4, 256 KiB per rank: 0.74-0.77x
// OpenMPI through the slots, 0.99-1.00x with CMA). So the group times both algorithms.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "comm/shm/shm_transport.hpp"
#include "core/log.hpp"

namespace commfuse::comm::shm {

uint64_t shared_core_crossover(const double* slots_us, const double* cma_us, size_t sizes) {
  uint64_t crossover = uint64_t{4} << 20;
  for (size_t i = sizes; i-- > 0 && cma_us[i] <= slots_us[i];) crossover = kSharedCoreProbeBytes[i];
  return crossover;
}

void ShmTransport::measure_shared_core_crossover() {
  constexpr size_t kSizes = std::size(kSharedCoreProbeBytes);
  constexpr int kRuns = 3;   // best of: a rank that waits for a core sets the others' times
  constexpr int kCalls = 4;  // per timing
  const auto peers = static_cast<uint64_t>(size_ - 1);
  CF_ASSERT(peers > 0 && cma_.unavailable.empty());
  const auto block = [&](size_t i) {
    return std::max<uint64_t>(64, kSharedCoreProbeBytes[i] / peers / 64 * 64);
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> src(block(kSizes - 1) * static_cast<uint64_t>(size_), 0);
  std::vector<uint8_t> dst(src.size());
  double slots_us[kSizes], cma_us[kSizes];
  std::fill(slots_us, slots_us + kSizes, 1e300);
  std::fill(cma_us, cma_us + kSizes, 1e300);
  for (size_t i = 0; i < kSizes; ++i)
    for (int run = 0; run <= kRuns; ++run)  // run 0 warms the buffers and the slots up
      for (const CollAlgo algo : {CollAlgo::kDefault, CollAlgo::kCma}) {
        // Calls back to back between barriers: a slots call leaves its peers still reading
        // when it returns, a cost the next call pays (CMA's closing wait pays it at once).
        a2a_probe_ = algo;
        barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int c = 0; c < kCalls; ++c) all_to_all(src.data(), dst.data(), block(i), DType::kInt8);
        barrier();
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count();
        double& best = algo == CollAlgo::kCma ? cma_us[i] : slots_us[i];
        if (run > 0) best = std::min(best, us);
      }
  a2a_probe_.reset();
  if (log::verbose_level() >= 1 && rank_ == 0) {
    std::string line = "shm crossover, ranks sharing cores: all_to_all slots / cma us at";
    for (size_t i = 0; i < kSizes; ++i)
      line += detail::cat(" ", kSharedCoreProbeBytes[i] >> 10, " KiB saved ", slots_us[i], " / ",
                          cma_us[i], i + 1 < kSizes ? ";" : "");
    log::verbose(detail::cat(line, " (", std::chrono::duration<double, std::milli>(
                                               std::chrono::steady_clock::now() - start)
                                               .count(),
                             " ms)"));
  }
  // Rank 0's timings decide for every rank (they must choose alike).
  uint64_t crossover = shared_core_crossover(slots_us, cma_us, kSizes);
  broadcast(&crossover, sizeof crossover, DType::kInt8, 0);
  cma_.min_bytes = crossover;
}

}  // namespace commfuse::comm::shm
