#include "comm/shm/peer_set.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/interrupt.hpp"
#include "core/error.hpp"
#include "core/params.hpp"

namespace commfuse::comm::shm {
namespace {

using Clock = std::chrono::steady_clock;

void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Shared (not private) futex: the word lives in memory mapped by several processes.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// /proc/<pid>/stat: "pid (comm) state ... starttime(22)"; comm may contain spaces. Read
// into a stack buffer with open/read, allocating nothing: a wait that outlasts its spinning
// checks its peers this way (check_peers), and a collective allocates nothing per call
// (tests/multirank/alloc_cases.cpp; through ifstream and istringstream it took 4
// allocations per check).
bool read_stat(pid_t pid, char* state, uint64_t* start_time) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char line[1024];
  const auto cap = static_cast<ssize_t>(sizeof line) - 1;
  ssize_t got = 0, n = 0;
  while (got < cap && (n = read(fd, line + got, static_cast<size_t>(cap - got))) != 0) {
    if (n > 0)
      got += n;
    else if (errno != EINTR)
      break;
  }
  close(fd);
  line[got] = '\0';
  const char* close_paren = std::strrchr(line, ')');
  if (close_paren == nullptr || close_paren[1] != ' ' || close_paren[2] == '\0') return false;
  // Field 3 (the state) follows ") "; the start time is field 22.
  const char* p = close_paren + 2;
  *state = *p;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(p, &end, 10);
  if (end == p || errno != 0) return false;
  *start_time = v;
  return true;
}

}  // namespace

PeerProcess this_process() {
  PeerProcess p;
  p.pid = getpid();
  char state = 0;
  read_stat(p.pid, &state, &p.start_time);
  return p;
}

bool process_alive(const PeerProcess& p) {
  if (kill(p.pid, 0) != 0 && errno == ESRCH) return false;
  char state = 0;
  uint64_t start = 0;
  if (!read_stat(p.pid, &state, &start)) return false;
  // A zombie (exited, not yet reaped) or a new process that reused the pid is not the peer.
  return state != 'Z' && state != 'X' && start == p.start_time;
}

PeerSet::PeerSet(int rank, std::vector<Control*> controls, std::vector<PeerProcess> processes,
                 bool oversubscribed)
    : rank_(rank),
      controls_(std::move(controls)),
      processes_(std::move(processes)),
      // With more ranks than cores a spinning rank steals the core its peer needs: give
      // it up at once. Otherwise spin some tens of microseconds first. AMD EPYC Zen 4, 2
      // cores, bench medians, 32 spins first / none: all_to_all W = 3 of 60 B 3.5 / 2.1 us
      // (0.83-0.96x / 1.27-1.34x OpenMPI), all_reduce W = 8 of 64 B 9.5-9.8 / 7.8-8.0 us;
      // level from 256 KiB, and in the fused ops at W = 4 and 8 (within their spread).
      spin_iters_(oversubscribed ? 0 : 8192),
      yield_iters_(oversubscribed ? 200 : 32),
      // Waiting for peers to finish reading this rank's memory (a CMA call's closing wait,
      // a copy of tens to hundreds of microseconds): past the 200 yields, a rank that slept
      // until the last reader was done paid for the wake-up. all_to_all of 1 MiB at W = 3 on 2
      // cores (AMX Xeon, driver, 3 runs): 0.88-0.91x OpenMPI with 200 yields then sleep, 1.03-1.09x
      // yielding for 1 ms more. Only there: with every wait yielding that long, small W = 3
      // all_to_alls measured no better (0.97 against 1.03 over 3 bench runs, within their
      // spread) — a sleeping rank's idle core may take over the rank it waits for.
      yield_for_(oversubscribed ? std::chrono::milliseconds(1) : std::chrono::microseconds(0)),
      timeout_(params::timeout_seconds()) {
  // A peer this rank cannot see by its pid (another pid namespace on the same host, as
  // containers of one pod, or no /proc) is not watched: a wait for it ends by its aborted
  // flag or the timeout. Watched, every wait past the spin phase failed at once with "rank 0
  // (pid ...) exited or was killed". Visibility was settled in set-up, while every peer was
  // alive: checked here, a peer that had already returned from set-up and exited looked
  // invisible, and the next wait for it ran out the whole timeout (1 run in 5).
  watched_.resize(processes_.size());
  for (size_t r = 0; r < processes_.size(); ++r)
    watched_[r] = static_cast<int>(r) != rank_ && processes_[r].visible;
}

void PeerSet::publish(uint32_t phase) {
  Control& c = mine();
  c.progress.store(phase, std::memory_order_seq_cst);
  if (c.waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&c.progress);
}

bool PeerSet::begin_call() {
  uint64_t w = call_word_.load(std::memory_order_relaxed);
  while ((w & (kAborted | kInCall)) == 0) {
    const uint32_t next = static_cast<uint32_t>(w >> kFlagBits) + 1;  // wraps as op_seq_ does
    if (call_word_.compare_exchange_weak(w, (uint64_t{next} << kFlagBits) | kInCall,
                                         std::memory_order_acq_rel))
      return true;
  }
  return false;
}

bool PeerSet::end_call() {
  uint64_t w = call_word_.load(std::memory_order_relaxed);
  while ((w & kAborted) == 0)
    if (call_word_.compare_exchange_weak(w, w & ~kInCall, std::memory_order_acq_rel)) return true;
  return false;
}

void PeerSet::abort(const std::string& reason) {
  uint64_t w = call_word_.load(std::memory_order_relaxed);
  while (!call_word_.compare_exchange_weak(w, w | kAborted, std::memory_order_acq_rel)) {
  }
  const auto in_flight = static_cast<uint32_t>(w >> kFlagBits);
  const uint32_t call = (w & kInCall) != 0 ? in_flight : in_flight + 1;
  std::lock_guard<std::mutex> lock(abort_mu_);
  Control& c = mine();
  if (c.aborted.load() != 0) return;
  detail::copy_message(c.reason, sizeof(c.reason), reason);
  c.aborted_call.store(call, std::memory_order_relaxed);
  c.aborted.store(1, std::memory_order_seq_cst);
  // Wake everyone sleeping on us so they see the abort now, not at their next timeout.
  c.progress.fetch_add(0, std::memory_order_seq_cst);
  futex_wake_all(&c.progress);
}

std::string PeerSet::missing_ranks(uint32_t target) {
  std::vector<int> ranks;
  for (int r = 0; r < size(); ++r)
    if (r != rank_ && !reached(of(r).progress.load(), target)) ranks.push_back(r);
  return detail::rank_list(ranks);
}

void PeerSet::fail_waiting(const char* op, uint32_t /*target*/, const std::string& why) {
  const std::string msg = detail::cat(op, "(rank ", rank_, "): ", why);
  abort(msg);
  detail::throw_status(Status::kRuntimeError, msg);
}

void PeerSet::fail_reading(int peer, int err, const char* op) {
  if (of(peer).aborted.load(std::memory_order_acquire) != 0)
    fail_waiting(op, 0, detail::cat("rank ", peer, " failed: ", of(peer).reason));
  // ESRCH: the process is gone or exiting (its /proc entry may still look alive).
  if (err == ESRCH || (watched_[peer] && !process_alive(processes_[peer])))
    fail_waiting(op, 0,
                 detail::cat("rank ", peer, " (pid ", processes_[peer].pid,
                             ") exited or was killed while rank ", rank_, " read its data"));
  fail_waiting(op, 0,
               detail::cat("reading rank ", peer,
                           "'s data with process_vm_readv failed: ", std::strerror(err)));
}

void PeerSet::check_read_intact(int peer, const char* op) {
  if (failed_in_call(of(peer)))
    fail_waiting(op, 0, detail::cat("rank ", peer, " failed: ", of(peer).reason));
}

void PeerSet::check_peers(int peer, uint32_t target, const char* op) {
  for (int r = 0; r < size(); ++r) {
    if (r == rank_) continue;
    Control& c = of(r);
    // A peer that already passed the awaited phase is not needed by this wait: it may have
    // finished its last call and exited, or failed in its next call (seen: rank 1 of 8,
    // still waiting for a slow peer in a CMA all_to_all_stream, failed that call naming
    // rank 7, which had passed it and then failed the next on purpose; the test expects
    // every rank to fail the next call). A later wait for it still notices. One that failed
    // this call after it published the phase fails it here too, as in arrived (seen: rank
    // 2 of 3 waited for a late rank 1 although rank 0 had aborted the call).
    if (reached(c.progress.load(std::memory_order_acquire), target) && !failed_in_call(c)) continue;
    if (c.aborted.load(std::memory_order_acquire) != 0)
      fail_waiting(op, target, detail::cat("rank ", r, " failed: ", c.reason));
    if (watched_[r] && !process_alive(processes_[r]))
      fail_waiting(
          op, target,
          detail::cat("rank ", r, " (pid ", processes_[r].pid, ") exited or was killed while rank ",
                      rank_, " waited for rank ", peer));
  }
}

// A peer that published the phase and then timed out in the same call (waiting for a rank
// later still) considers the call failed: so must this rank, which would otherwise finish
// it with the peer's data and report success (seen: a rank arriving 2 s after its peers
// timed out completed an all_reduce and stayed usable). The flag shares the phase's cache
// line, so the check costs no transfer. A peer that aborted in a later call (it finished
// this one) does not fail this one.
bool PeerSet::arrived(Control& c, int peer, uint32_t target, const char* op) {
  if (!reached(c.progress.load(std::memory_order_acquire), target)) return false;
  if (failed_in_call(c)) {
    // This rank's own abort (a watchdog's, meanwhile) first: the peer's failure may be its
    // echo of it, and the aborting rank's call is promised to fail with its own reason (seen:
    // "rank 2 failed: ... rank 1 failed: rank 1 aborted the communicator: watchdog").
    const Control& me = mine();
    if (me.aborted.load(std::memory_order_acquire) != 0) fail_waiting(op, target, me.reason);
    fail_waiting(op, target, detail::cat("rank ", peer, " failed: ", c.reason));
  }
  return true;
}

bool PeerSet::failed_in_call(const Control& c) const {
  return c.aborted.load(std::memory_order_acquire) != 0 &&
         static_cast<int32_t>(c.aborted_call.load(std::memory_order_relaxed) - call()) <= 0;
}

void PeerSet::wait(int peer, uint32_t target, const char* op, Wait how) {
  Control& c = of(peer);
  for (int i = 0; i < spin_iters_; ++i) {
    if (arrived(c, peer, target, op)) return;
    cpu_relax();
  }
  Clock::time_point yield_until;  // read only by a kPeerCopy wait past yield_iters_
  for (int i = 0;; ++i) {
    if (arrived(c, peer, target, op)) return;
    if (i >= yield_iters_) {
      if (how == Wait::kShort || yield_for_.count() == 0) break;
      const auto now = Clock::now();
      if (i == yield_iters_)
        yield_until = now + yield_for_;
      else if (now >= yield_until)
        break;
    }
    sched_yield();
  }
  const auto start = Clock::now();
  const auto deadline = start + timeout_;
  auto next_check = start;
  const Control& me = mine();
  InterruptPoll interrupt;
  while (true) {
    const uint32_t seen = c.progress.load(std::memory_order_acquire);
    if (arrived(c, peer, target, op)) return;
    // Aborted from another thread (a watchdog's Comm::abort): end the wait now, not at the
    // deadline. Checked only here, past the spinning: a sleep lasts 20 ms at most.
    if (me.aborted.load(std::memory_order_acquire) != 0) fail_waiting(op, target, me.reason);
    const auto now = Clock::now();
    if (now >= next_check) {
      check_peers(peer, target, op);
      next_check = now + std::chrono::milliseconds(100);
    }
    if (const std::string why = interrupt.poll(now); !why.empty())
      fail_waiting(op, target,
                   interrupted_message(why, detail::cat("waiting for ", missing_ranks(target))));
    if (now >= deadline)
      fail_waiting(op, target,
                   detail::cat("timed out after ", timeout_.count(),
                               " s (COMMFUSE_TIMEOUT_S) waiting for ", missing_ranks(target)));
    c.waiters.fetch_add(1, std::memory_order_seq_cst);
    if (!reached(c.progress.load(std::memory_order_seq_cst), target))
      futex_wait(&c.progress, seen, 20);
    c.waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void PeerSet::wait_all(uint32_t target, const char* op, Wait how) {
  for (int i = 1; i < size(); ++i) wait((rank_ + i) % size(), target, op, how);
}

}  // namespace commfuse::comm::shm
