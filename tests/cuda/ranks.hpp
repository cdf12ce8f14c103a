// W ranks as separate processes sharing the GPU (the GPU machines lent here have one), for
// the CUDA tests of the symmetric heap and the operators' device schedules. The ranks are
// forked before any CUDA call (CUDA does not survive fork) and meet on an anonymous shared
// mapping (Board): this is the tests' bootstrap, not a transport under test (the product's
// exchanges are the communicator's all_gather and barrier).
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"

namespace cudatest {

inline constexpr int kMaxRanks = 4;
inline constexpr int kMaxRounds = 512;  // exchanges per test run (each round used once)
inline constexpr size_t kRecordBytes = 512;

// The ranks' meeting place: a counter per exchange round and one record slot per rank.
struct Board {
  std::atomic<int> arrived[kMaxRounds];
  uint32_t len[kMaxRounds][kMaxRanks];
  char data[kMaxRounds][kMaxRanks][kRecordBytes];
};

// One rank's view of the board: all_gather of strings in rank order, round after round;
// gives up (exit 1) after 60 s or past kMaxRounds.
class Meeting {
 public:
  Meeting(Board* b, int rank, int size) : b_(b), rank_(rank), size_(size) {}
  std::vector<std::string> all_gather(const std::string& s) {
    const int round = round_++;
    if (s.size() > kRecordBytes || round >= kMaxRounds) {
      std::fprintf(stderr, "FAILED: rank %d: exchange %d of %zu bytes is past the board\n", rank_,
                   round, s.size());
      std::exit(1);
    }
    std::memcpy(b_->data[round][rank_], s.data(), s.size());
    b_->len[round][rank_] = static_cast<uint32_t>(s.size());
    b_->arrived[round].fetch_add(1, std::memory_order_acq_rel);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (b_->arrived[round].load(std::memory_order_acquire) < size_) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "FAILED: rank %d: exchange %d timed out\n", rank_, round);
        std::exit(1);
      }
      std::this_thread::yield();
    }
    std::vector<std::string> all;
    for (int r = 0; r < size_; ++r) all.emplace_back(b_->data[round][r], b_->len[round][r]);
    return all;
  }
  void barrier() { all_gather(std::string()); }

 private:
  Board* b_;
  int rank_, size_;
  int round_ = 0;
};

// Runs `fn` in a child (so this process never initializes CUDA); its exit status.
template <typename F>
int in_child(F&& fn) {
  std::fflush(nullptr);  // nothing buffered may be printed again by the child
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAILED: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  if (pid < 0) return 1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// 0 when device 0 can be shared between processes over CUDA IPC; else the exit status of a
// skip (77; 1 under COMMFUSE_REQUIRE_GPU=1), having said why. Probed in a child.
inline int probe_ipc_device() {
  return in_child([] {
    const int rc = exit_without_device();
    if (rc >= 0) return rc;
    // A GPU that cannot share memory between processes fails every rank slowly (each waits
    // for the exchange's deadline): say why at once instead.
    int ipc = 0, mode = 0;
    cudaDeviceGetAttribute(&ipc, cudaDevAttrIpcEventSupport, 0);
    cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, 0);
    if (ipc != 0 && mode == cudaComputeModeDefault) return 0;
    std::printf("device cases SKIPPED: device 0 %s\n",
                ipc == 0 ? "supports no CUDA IPC" : "is not in the default compute mode");
    const char* require = std::getenv("COMMFUSE_REQUIRE_GPU");
    return require != nullptr && std::string(require) == "1" ? 1 : 77;
  });
}

// Forks `size` ranks, each running run_rank(meeting, rank) (0 = passed), and waits for them;
// prints one line. The number of ranks that failed.
template <typename F>
int run_ranks(int size, F&& run_rank) {
  void* mem =
      mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return size;
  auto* board = new (mem) Board{};
  std::vector<pid_t> pids;
  int bad = 0;
  std::fflush(nullptr);
  for (int r = 0; r < size; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 1;
      try {
        Meeting meeting(board, r, size);
        rc = run_rank(meeting, r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "FAILED: rank %d of %d: %s\n", r, size, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    if (pid < 0)
      ++bad;  // the other ranks then fail their exchange at its deadline
    else
      pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    const bool reaped = waitpid(pid, &status, 0) == pid;
    bad += !(reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::printf("W=%d ranks sharing the GPU: %s\n", size, bad == 0 ? "passed" : "FAILED");
  std::fflush(nullptr);
  munmap(mem, sizeof(Board));
  return bad;
}

}  // namespace cudatest
