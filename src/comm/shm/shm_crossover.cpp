// The collectives' choices of a group whose ranks share cores, timed on the group itself
// (shm_transport.hpp: measure_shared_cores). With a core per rank they follow from a
// model of measured costs (cma.hpp: one system call and one synchronization; all_reduce's
// one-shot saves a synchronization); where ranks share cores a wait lasts until the peer
// gets a core, and the models were off: on the AMX Xeon with 2 cores all_to_all crossed
// over to CMA at 87-112 KiB saved per rank at W = 3, 4 and 8 where the context-switch
// estimate (20 us x the copy rate) said 512 KiB (W = 4 at 256 KiB-1 MiB per rank: 0.74-0.77x
// OpenMPI through the slots, 0.99-1.00x with CMA), and two-shot all_reduce ran 1.5x faster
// than one-shot from 16 KiB at W = 4 and 8, where the fixed rule kept one-shot up to 4 ranks
// (an AMD EPYC measured one-shot faster at W = 4). So the group times both ways.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <vector>

#include "comm/call_check.hpp"
#include "comm/shm/shm_transport.hpp"
#include "core/cpu_features.hpp"
#include "core/log.hpp"
#include "core/trace.hpp"

namespace commfuse::comm::shm {

uint64_t best_crossover_size(const uint64_t* sizes, const double* first_us, const double* second_us,
                             size_t n, uint64_t never) {
  // Candidate c takes the second algorithm at sizes [c, n) (c == n: never). Its loss at a
  // size is the time it takes there over the better of the two times; the least total
  // loss wins, the smaller size on a tie. (The rule it replaced, "from the smallest size
  // where the second wins there and at every larger size", turned on the largest size
  // alone where both run at the copy rate: W = 3 on 2 cores timed 656 / 664 us at 512 KiB
  // against 101 / 81 at 128 KiB and 222 / 148 at 256 KiB, and chose never in 2 runs of 6,
  // which left all_to_all at 0.69-0.85x OpenMPI from 256 KiB to 4 MiB.)
  auto loss = [&](size_t c) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      const double best = std::min(first_us[i], second_us[i]);
      const double taken = i >= c ? second_us[i] : first_us[i];
      sum += taken / std::max(best, 1e-3);  // a time is never 0 (4 calls and a barrier)
    }
    return sum;
  };
  size_t best = n;
  double least = loss(n);
  for (size_t c = n; c-- > 0;)
    if (const double l = loss(c); l <= least) {
      best = c;
      least = l;
    }
  return best == n ? never : sizes[best];
}

uint64_t slots_spill_bytes(int world, uint64_t llc_bytes) {
  constexpr uint64_t kCap = uint64_t{4} << 20;
  // The slots won at the largest probed size, so never at or under it.
  constexpr uint64_t kFloor = 2 * kSharedCoreA2aBytes[std::size(kSharedCoreA2aBytes) - 1];
  if (world < 2 || llc_bytes == 0) return kCap;
  const auto w = static_cast<uint64_t>(world);
  // 3 · W · (saved · W / (W - 1)) >= llc, as saved >= llc · (W - 1) / (3 · W²) (llc is at
  // most a few GiB, so llc · (W - 1) fits for any group size).
  return std::clamp(llc_bytes * (w - 1) / (3 * w * w), kFloor, kCap);
}

namespace {

constexpr uint64_t kNever = ~uint64_t{0};
constexpr int kRuns = 3;   // best of: a rank that waits for a core sets the others' times
constexpr int kCalls = 4;  // per timing

// Best time of `call` under each of the two algorithms at each size (set_algo(a) before the
// calls, the calls back to back between barriers: a slots call leaves its peers still
// reading when it returns, a cost the next call pays, where CMA's closing wait pays it at
// once).
template <typename SetAlgo, typename Call, typename Barrier>
void time_both(size_t sizes, CollAlgo first, CollAlgo second, SetAlgo&& set_algo, Call&& call,
               Barrier&& barrier, double* first_us, double* second_us) {
  std::fill(first_us, first_us + sizes, 1e300);
  std::fill(second_us, second_us + sizes, 1e300);
  for (size_t i = 0; i < sizes; ++i)
    for (int run = 0; run <= kRuns; ++run)  // run 0 warms the buffers and the slots up
      for (const CollAlgo algo : {first, second}) {
        set_algo(algo);
        barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int c = 0; c < kCalls; ++c) call(i);
        barrier();
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count();
        double& best = algo == first ? first_us[i] : second_us[i];
        if (run > 0) best = std::min(best, us);
      }
}

std::string describe_times(const char* what, const uint64_t* sizes, const double* a,
                           const double* b, size_t n) {
  std::string line = what;
  for (size_t i = 0; i < n; ++i)
    line += detail::cat(i == 0 ? " " : "; ", sizes[i] >> 10, " KiB ", a[i], " / ", b[i]);
  return line;
}

}  // namespace

void ShmTransport::measure_shared_cores(bool time_all_to_all, bool time_all_reduce) {
  CF_ASSERT(size_ > 1);
  // Set-up's own calls: a fault injected into the user's all_reduce or all_to_all
  // (COMMFUSE_FAULT) and mismatch messages name them as such, not as the user's.
  // Nor are they in the user's trace.
  const trace::Pause no_trace;
  CallSignature setup;
  setup.op = "comm init";
  const CallScope scope(setup);
  const auto start = std::chrono::steady_clock::now();
  auto barrier_fn = [&] { barrier(); };
  std::string log_line;

  constexpr size_t kA2a = std::size(kSharedCoreA2aBytes);
  double slots_us[kA2a], cma_us[kA2a];
  uint64_t decided[2] = {cma_.min_bytes, 0};  // 0: all_reduce by the fixed rule
  if (time_all_to_all && cma_.unavailable.empty()) {
    const auto peers = static_cast<uint64_t>(size_ - 1);
    // Rounded up: a call that saves the decided size took the algorithm timed there.
    const auto block = [&](size_t i) {
      return std::max<uint64_t>(64, (kSharedCoreA2aBytes[i] / peers + 63) / 64 * 64);
    };
    std::vector<uint8_t> src(block(kA2a - 1) * static_cast<uint64_t>(size_), 0);
    std::vector<uint8_t> dst(src.size());
    time_both(
        kA2a, CollAlgo::kDefault, CollAlgo::kCma, [&](CollAlgo a) { a2a_probe_ = a; },
        [&](size_t i) { all_to_all(src.data(), dst.data(), block(i), DType::kInt8); }, barrier_fn,
        slots_us, cma_us);
    a2a_probe_.reset();
    const uint64_t spill = slots_spill_bytes(size_, cpu::llc_bytes());
    decided[0] = best_crossover_size(kSharedCoreA2aBytes, slots_us, cma_us, kA2a, spill);
    log_line = describe_times("all_to_all slots / cma us at", kSharedCoreA2aBytes, slots_us, cma_us,
                              kA2a) +
               (decided[0] == spill  // above every probe: the slots won them all
                    ? detail::cat(" (the slots won every probe: CMA from where the group's slot "
                                  "copies outgrow the ",
                                  cpu::llc_bytes(), "-byte last-level cache)")
                    : std::string()) +
               "; ";
  }

  // all_reduce at each probed step size a step can have (the slots cap it; COMMFUSE_ALGO
  // pinning all_reduce leaves nothing to decide).
  constexpr size_t kAr = std::size(kSharedCoreAllReduceBytes);
  const uint64_t max_step = std::min<uint64_t>(slot_bytes_, kReduceStepBytes);
  size_t ar_sizes = 0;
  while (ar_sizes < kAr && kSharedCoreAllReduceBytes[ar_sizes] <= max_step) ++ar_sizes;
  if (time_all_reduce && ar_sizes > 0) {
    const auto floats = [&](size_t i) { return kSharedCoreAllReduceBytes[i] / sizeof(float); };
    std::vector<float> in(floats(ar_sizes - 1), 1.0f), out(in.size());
    double one_us[kAr], two_us[kAr];
    time_both(
        ar_sizes, CollAlgo::kOneShot, CollAlgo::kTwoShot,
        [&](CollAlgo a) { all_reduce_probe_ = a; },
        [&](size_t i) { all_reduce(in.data(), out.data(), floats(i), DType::kFloat32); },
        barrier_fn, one_us, two_us);
    all_reduce_probe_.reset();
    decided[1] = best_crossover_size(kSharedCoreAllReduceBytes, one_us, two_us, ar_sizes, kNever);
    log_line += describe_times("all_reduce one-shot / two-shot us at", kSharedCoreAllReduceBytes,
                               one_us, two_us, ar_sizes);
  }

  // Rank 0's timings decide for every rank (they must choose alike).
  broadcast(decided, sizeof decided, DType::kInt8, 0);
  cma_.min_bytes = decided[0];
  two_shot_min_bytes_ = decided[1];
  shared_cores_measured_ = true;
  if (log::verbose_level() >= 1 && rank_ == 0)
    log::verbose(detail::cat(
        "shm, ranks sharing cores, timed at set-up (",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
        " ms): ", log_line, " -> all_to_all with CMA from ", decided[0],
        " bytes saved, all_reduce two-shot ",
        decided[1] == 0        ? std::string("by the fixed rule")
        : decided[1] == kNever ? std::string("never")
                               : detail::cat("from ", decided[1], "-byte steps")));
}

}  // namespace commfuse::comm::shm
