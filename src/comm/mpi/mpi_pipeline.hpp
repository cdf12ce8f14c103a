// The transfers of one stream over MPI, piece by piece, driven either by a progress thread
// (when MPI allows calls from another thread: MPI_THREAD_SERIALIZED or better, and the
// calling thread makes no MPI call until finish(); and the host's ranks do not outnumber its
// cores) or, failing that, inline between the caller's blocks of computation. With the thread, Open
// MPI's TCP transport keeps moving bytes while the caller computes — it moves bytes only inside MPI
// calls — so a GEMM on piece i overlaps the transfer of piece i+1 for real. Only built with MPI.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
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
  std::string missing(size_t piece) const;

  MPI_Comm comm_;
  int tag_;
  int rank_;
  const char* op_;
  WaitRules rules_;
  bool threaded_;
  std::vector<std::unique_ptr<Piece>> pieces_;
  std::vector<MPI_Request> send_reqs_;
  size_t next_send_ = 0;      // progress side: the next piece whose sends to post
  size_t first_pending_ = 0;  // progress side: pieces before it have all arrived
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> failed_{false};
  std::string failure_;  // set before failed_ (release)
  std::thread thread_;
};

// Whether MPI lets a progress thread make the calls (queried once).
bool mpi_allows_progress_thread();
// Whether any thread may call MPI at any time (MPI_THREAD_MULTIPLE; queried once).
bool mpi_allows_any_thread();

}  // namespace commfuse::comm::mpi
