// The transfers of one stream over MPI, piece by piece, driven either by a progress thread
// (WaitRules::progress_thread, and MPI allows calls from another thread:
// MPI_THREAD_SERIALIZED or better, the calling thread making no MPI call until finish()) or
// inline between the caller's blocks of computation. Open MPI's TCP transport moves bytes
// only inside MPI calls: with a core to itself, the thread keeps them moving while the caller
// computes; without one it takes its time from that computation. Only built with MPI.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_requests.hpp"

namespace commfuse::comm::mpi {

class Pipeline {
 public:
  struct Transfer {
    int peer;
    uint8_t* buf;
    uint64_t bytes;
  };

  Pipeline(MPI_Comm comm, int tag, int rank, const char* op, const WaitRules& rules, size_t pieces);
  ~Pipeline();  // stops and joins the thread; cancels unfinished receives
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Before start(): what piece i receives.
  void expect(size_t piece, Transfer t);
  void start();
  // Piece i's data is packed: send it (in piece order).
  void send(size_t piece, std::vector<Transfer> sends);
  // Between blocks of computation: lets MPI move bytes (inline mode only).
  void poll();
  // Returns once every receive of piece i has landed; RUNTIME_ERROR after timeout_s seconds
  // without progress, naming the peers not heard from, or once rules.stop records a failure.
  void wait(size_t piece);
  // Every send completed (the peers have the data); the thread is joined.
  void finish();

 private:
  struct Piece {
    std::vector<Transfer> recvs, sends;
    std::vector<MPI_Request> recv_reqs;
    std::vector<int> recv_peers;  // per request (for test_some's error)
    std::atomic<bool> arrived{false};
    bool sends_ready = false;  // guarded by mu_
    bool sent = false;         // progress side only
  };
  // One pass: post ready sends, test receives and sends. Returns true if anything completed.
  bool step();
  void thread_main();
  [[noreturn]] void fail(const std::string& why);
  bool stopped() const { return rules_.stop != nullptr && rules_.stop->failed(); }
  std::string stop_reason() const;
  void back_off(int polls) const;  // between unproductive polls (inline mode)
  // "<op>(rank r): timed out after ... <waiting>" / "<op>(rank r): interrupted (<why>) while
  // <waiting>", where waiting is missing_what's or untaken's.
  std::string timed_out(const std::string& waiting) const;
  std::string interrupted(const std::string& why, const std::string& waiting) const;
  std::string untaken() const;  // "waiting for the peers to take rank r's data"
  // "waiting for rank(s) ..." of piece: those whose data has not come where own_requests
  // (the calling thread polls them), else every sender of the piece.
  std::string missing_what(size_t piece, bool own_requests) const;

  MPI_Comm comm_;
  int tag_;
  int rank_;
  const char* op_;
  WaitRules rules_;
  bool threaded_;
  std::vector<std::unique_ptr<Piece>> pieces_;
  std::vector<MPI_Request> send_reqs_;
  std::vector<int> send_peers_;  // per request
  size_t next_send_ = 0;         // progress side: the next piece whose sends to post
  size_t first_pending_ = 0;     // progress side: pieces before it have all arrived
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  // finish() waits on it (not join() alone) so that the host's interrupt check is polled.
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::atomic<bool> failed_{false};
  std::string failure_;  // set before failed_ (release)
  std::thread thread_;
};

// MPI's thread level (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE; queried once).
int mpi_thread_level();
// Whether MPI lets a progress thread make the calls (queried once).
bool mpi_allows_progress_thread();
// Whether streams get a progress thread, given COMMFUSE_MPI_PROGRESS_THREAD (mode) and
// COMMFUSE_NUM_THREADS (override_threads), both read before the set-up exchange so that a bad
// value fails every rank at once: auto = only where this host's ranks leave a core free for
// it (kernels::cpu::core_left_free). Otherwise the thread runs on a core that computes. W = 2 over
// TCP on 2 cores, one compute thread a rank (AMX Xeon, 2 runs each, thread / inline):
// all_gather_matmul 4096×4096×64 bf16 14.7-15.1 / 11.7-11.8 ms (the unfused composition 17.0-17.8),
// matmul_reduce_scatter 4096×4096×64 1.66-1.96 / 1.47-1.61 ms, at 256×1024×256 211-223 / 160-168
// us; matmul_all_reduce 16×4096×512 423-428 / 381-398 us.
bool use_progress_thread(std::string_view mode, int local_ranks, int cores, int override_threads);
// Whether any thread may call MPI at any time (MPI_THREAD_MULTIPLE; queried once).
bool mpi_allows_any_thread();

}  // namespace commfuse::comm::mpi
