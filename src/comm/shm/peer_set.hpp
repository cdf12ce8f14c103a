// The ranks on this host as seen by one rank: each peer's control block in shared memory,
// and how to wait for a peer to reach a phase — spin briefly, then yield, then futex-wait —
// with a deadline and a check that the peer's process is still alive.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "comm/call_check.hpp"
#include "comm/transport.hpp"

namespace commfuse::comm::shm {

// Lives at the start of each rank's segment; written only by its owner (except waiters).
struct alignas(64) Control {
  std::atomic<uint32_t> progress;      // phase counter, monotonic (mod 2^32); also the futex word
  std::atomic<uint32_t> waiters;       // peers sleeping on progress: the owner wakes them
  std::atomic<uint32_t> aborted;       // nonzero once the owner has failed; reason below
  std::atomic<uint32_t> aborted_call;  // the owner's call number (op_seq) when it failed
  // A 64-bit digest of desc[parity] (call_digest), in the cache line a waiter has just read
  // for `progress`: a call's descriptor check compares digests and reads the descriptors
  // themselves (several cache lines per peer, 0.3-0.5 us of a 0.6 us 64-byte all_reduce at
  // W = 2) only when one differs. Written before the phase that publishes it.
  std::atomic<uint64_t> digest[2];
  // On lines of their own: the first line is the one waiting peers spin on, and a
  // descriptor written into it took the line back from them on every call (a 64-byte
  // all_to_all at W = 2: 0.37-0.42 us with, 0.34-0.35 without, AMX Xeon).
  struct alignas(64) Desc {
    uint32_t op;
    int32_t dtype;
    uint64_t count;
    int32_t root;
    uint32_t op_seq;
    uint64_t unit;  // streams: the piece size (CollDesc::piece)
    uint32_t algo;  // CollDesc::algo
    uint32_t reserved;
    uint64_t cma_address;  // algo kCma: where in the owner's memory its data starts
    WireSignature sig;     // the user's call (comm/call_check.hpp)
    char reason[400];      // op kRejectedOp: why the owner rejected the call
  } desc[2];               // the op the owner is in, by op sequence parity
  char reason[512];
};
static_assert(sizeof(Control) <= 4096, "control block must fit its page");
static_assert(offsetof(Control, desc) >= 64, "descriptors stay off the phase counter's line");

// Identity of a peer process, to tell "slow" from "dead" (and a reused pid from the peer).
struct PeerProcess {
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22
  // Whether this rank sees the peer by that pid (not in another pid namespace, /proc
  // mounted), found while the peer was certainly alive: in communicator set-up, before the
  // barrier it cannot pass without this rank (comm_create.cpp). Only a visible peer's
  // liveness is checked by the waits.
  bool visible = false;
};
PeerProcess this_process();
bool process_alive(const PeerProcess& p);

// Phase comparison that survives wrap-around of the 32-bit counter.
inline bool reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

class PeerSet {
 public:
  PeerSet(int rank, std::vector<Control*> controls, std::vector<PeerProcess> processes,
          bool oversubscribed);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(controls_.size()); }
  Control& mine() { return *controls_[rank_]; }
  Control& of(int r) { return *controls_[r]; }

  // Publishes this rank's phase and wakes peers sleeping on it.
  void publish(uint32_t phase);
  // The transport's call number (op_seq) of the call now in progress, from begin_call to
  // end_call: an abort records it, and a peer's abort during this call or before fails this
  // call's waits even where the peer had already published the awaited phase (wait).
  // begin_call is false once an abort came (between calls: the call must not start) or
  // while a call is in flight (a second thread: CommImpl::Entered refuses it first); end_call
  // is false if an abort came during the call (the call must fail: its peers do). The call
  // begun is the one after the word's last (the transport's op_seq_ + 1: both count every
  // begun call from 0).
  bool begin_call();
  bool end_call();
  // How a wait gives up the core once spinning has not sufficed (wait below).
  enum class Wait {
    kShort,  // a few yields, then sleep on the futex
    // Waiting out a peer's copy (cma_call: peers still reading this rank's memory): with
    // more ranks than cores, after those yields keep yielding for yield_for_ more (per
    // peer waited for) before sleeping.
    kPeerCopy,
  };
  // Waits until rank peer has published phase >= target. `op` names the operation for errors.
  // Fails (RUNTIME_ERROR) once this rank was aborted meanwhile, from another thread.
  void wait(int peer, uint32_t target, const char* op, Wait how = Wait::kShort);
  void wait_all(uint32_t target, const char* op, Wait how = Wait::kShort);
  // Marks this rank failed so peers stop waiting for it, with the reason they will report.
  // The call it fails is the one in flight (begin_call), or between calls the next one, so that
  // peers still finishing the last call are not failed. Any thread; the first abort stands.
  void abort(const std::string& reason);
  pid_t pid(int r) const { return processes_[r].pid; }
  // A CMA read of peer's memory failed with errno err: aborts naming why (the peer failed,
  // died, or the kernel refused) and throws RUNTIME_ERROR.
  [[noreturn]] void fail_reading(int peer, int err, const char* op);
  // After a read of peer's memory that no later wait of this call checks (a non-root's CMA
  // broadcast read): fails the call (RUNTIME_ERROR naming peer) if peer failed during it, as
  // it may then have reused that memory while this rank read it.
  void check_read_intact(int peer, const char* op);

 private:
  [[noreturn]] void fail_waiting(const char* op, uint32_t target, const std::string& why);
  void check_peers(int peer, uint32_t target, const char* op);
  // The awaited phase is published: true, unless the peer aborted during this call or an
  // earlier one (then the call fails here, naming it).
  bool arrived(Control& c, int peer, uint32_t target, const char* op);
  // Whether the owner of c failed during this call or an earlier one.
  bool failed_in_call(const Control& c) const;
  std::string missing_ranks(uint32_t target);

  int rank_;
  // The call number (upper bits) and kInCall / kAborted, changed only by compare-and-swap:
  // an abort from another thread either lands inside a call, which then fails on this rank
  // as on its peers, or between calls, failing the next — never both ways at once (two
  // separate words let an abort record a call this rank then reported as done).
  static constexpr uint64_t kInCall = 1, kAborted = 2, kFlagBits = 2;
  std::atomic<uint64_t> call_word_{0};
  uint32_t call() const {
    return static_cast<uint32_t>(call_word_.load(std::memory_order_relaxed) >> kFlagBits);
  }
  std::mutex abort_mu_;  // one abort writes this rank's reason
  std::vector<Control*> controls_;
  std::vector<PeerProcess> processes_;
  std::vector<uint8_t> watched_;  // per rank: its process is visible here (see the constructor)
  int spin_iters_;
  int yield_iters_;
  std::chrono::microseconds yield_for_;  // Wait::kPeerCopy: yield at least this long
  std::chrono::seconds timeout_;
};

}  // namespace commfuse::comm::shm
