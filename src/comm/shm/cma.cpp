#include "comm/shm/cma.hpp"

#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/probe_timing.hpp"

namespace commfuse::comm::shm {
namespace {

using clock = std::chrono::steady_clock;

// Atomic: communicators created on two threads at once both store it (the same value).
// process_vm_readv reads its 8 bytes from another process.
std::atomic<uint64_t> g_probe_word{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

}  // namespace

uint64_t cma_probe_value(pid_t pid) {
  return 0x636d612d70726f62ull ^ static_cast<uint64_t>(pid);  // "cma-prob" ^ pid
}

uint64_t cma_probe_address() {
  g_probe_word.store(cma_probe_value(getpid()), std::memory_order_relaxed);
  return reinterpret_cast<uint64_t>(&g_probe_word);
}

bool cma_read(pid_t pid, void* dst, uint64_t address, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    iovec local{out, n};
    iovec remote{reinterpret_cast<void*>(address), n};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (got == 0) {  // nothing readable at that address: report it like the kernel would
      errno = EFAULT;
      return false;
    }
    out += got;
    address += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
  return true;
}

double cma_syscall_us() {
  static const double us = [] {
    uint64_t word = 0, got = 0;
    double best = 1e9;
    for (int i = 0; i < 16; ++i) {
      const auto t0 = clock::now();
      if (!cma_read(getpid(), &got, reinterpret_cast<uint64_t>(&word), sizeof word)) return 1.0;
      best = std::min(best, std::chrono::duration<double, std::micro>(clock::now() - t0).count());
    }
    return best;
  }();
  return us;
}

double measure_thread_sync_us() {
  return [] {
    std::atomic<int> flag{0};
    std::atomic<bool> stop{false}, ready{false};
    constexpr int kTrips = 200;
    std::thread partner([&] {
      ready.store(true, std::memory_order_release);
      for (int expect = 1; !stop.load(std::memory_order_relaxed);) {
        if (flag.load(std::memory_order_acquire) == expect) {
          flag.store(expect + 1, std::memory_order_release);
          expect += 2;
        }
      }
    });
    // The clock starts once the partner runs. Up to 20 runs, each given 2 ms: a run in
    // which the two threads share a core misses it and is not counted; the best of the
    // first 3 that finish is kept.
    const auto start_by = clock::now() + std::chrono::milliseconds(50);
    while (!ready.load(std::memory_order_acquire) && clock::now() < start_by) {
    }
    double best = -1;
    int finished = 0, next = 1;
    for (int run = 0; run < 20 && finished < 3 && ready.load(); ++run) {
      const auto t0 = clock::now();
      const auto deadline = t0 + std::chrono::milliseconds(2);
      bool ok = true;
      for (int i = 0; i < kTrips && ok; ++i, next += 2) {
        flag.store(next, std::memory_order_release);
        while (ok && flag.load(std::memory_order_acquire) != next + 1) ok = clock::now() < deadline;
      }
      if (!ok) {  // let the partner answer the last flag before the next run starts
        while (flag.load(std::memory_order_acquire) != next - 1) std::this_thread::yield();
        continue;
      }
      ++finished;
      const double us =
          std::chrono::duration<double, std::micro>(clock::now() - t0).count() / (2 * kTrips);
      best = best < 0 ? us : std::min(best, us);
    }
    stop.store(true);
    partner.join();
    return best;
  }();
}

double thread_sync_us() {
  static const double us = measure_thread_sync_us();
  return us;
}

uint64_t cma_crossover_bytes(bool oversubscribed, double sync_us) {
  // Sharing cores, a wait costs a context switch (about 20 us measured at W=4 on 2 cores,
  // docs/algorithms.md); with a core per rank, the system call plus the measured
  // synchronization (2 us where it could not be measured: the older, fixed estimate).
  const double fixed_us = oversubscribed ? 20.0 : cma_syscall_us() + (sync_us >= 0 ? sync_us : 2.0);
  const double bytes = fixed_us * kernels::cpu::copy_bytes_per_us();
  // The largest power of two in [4 KiB, 4 MiB] not above it: at the crossover both ways
  // cost the same, and the slots' real cost per byte is higher than one copy (their peers
  // read lines another core has just written).
  uint64_t p = 4 * 1024;
  while (p * 2 <= bytes && p < (uint64_t{4} << 20)) p *= 2;
  return p;
}

std::string cma_probe(pid_t pid, uint64_t address) {
  uint64_t value = 0;
  if (!cma_read(pid, &value, address, sizeof value)) return std::strerror(errno);
  return value == cma_probe_value(pid) ? std::string() : std::string("read a wrong value");
}

std::string cma_self_check() {
  const uint64_t address = cma_probe_address();
  const pid_t parent = getpid();
  int fds[2];
  if (pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (child == 0) {  // only async-signal-safe calls until _exit
    uint64_t value = 0;
    iovec local{&value, sizeof value};
    iovec remote{reinterpret_cast<void*>(address), sizeof value};
    const ssize_t got = process_vm_readv(parent, &local, 1, &remote, 1, 0);
    const int err = got == static_cast<ssize_t>(sizeof value) ? 0 : got < 0 ? errno : EFAULT;
    const int ok = err == 0 && value == cma_probe_value(parent) ? 0 : (err != 0 ? err : -1);
    ssize_t w = write(fds[1], &ok, sizeof ok);
    (void)w;
    _exit(0);
  }
  close(fds[1]);
  int result = -2;
  const ssize_t got = read(fds[0], &result, sizeof result);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (got != static_cast<ssize_t>(sizeof result)) return "the probing child reported nothing";
  if (result == 0) return {};
  if (result == -1) return "read a wrong value";
  return std::strerror(result);
}

namespace {

// One process_vm_readv of n bytes from this process (kernels::cpu::best_probe_ns, best of
// 3); 0 where the kernel refused (then no distance is slow: the probe only runs where the
// group has CMA).
double self_read_ns(uint8_t* dst, const uint8_t* src, size_t n) {
  bool ok = true;
  const double ns = kernels::cpu::best_probe_ns(
      [&] { ok = cma_read(getpid(), dst, reinterpret_cast<uint64_t>(src), n) && ok; }, 3, true);
  return ok ? ns : 0;
}

}  // namespace

const kernels::cpu::SlowCopyDistances& cma_slow_distances() {
  // Against the same read into the page offset of the source (where the bounce lands).
  static const kernels::cpu::SlowCopyDistances slow =
      kernels::cpu::pinned_or_found(self_read_ns, [](uint8_t* dst, const uint8_t* src, size_t n) {
        const auto off =
            (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
        return self_read_ns(dst - off, src, n);
      });
  return slow;
}

}  // namespace commfuse::comm::shm
