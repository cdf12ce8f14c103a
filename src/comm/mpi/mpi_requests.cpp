#if COMMFUSE_HAVE_MPI
#include "comm/mpi/mpi_requests.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/interrupt.hpp"
#include "core/error.hpp"

namespace commfuse::comm::mpi {
namespace {

using Clock = std::chrono::steady_clock;

// Largest piece of one message: well inside int, and small enough that a slow link still
// completes pieces (= shows progress) often.
constexpr size_t kPieceBytes = size_t{64} << 20;

}  // namespace

// Up to twice the eager size, eager pieces: all_gather and all_to_all at 256 KiB over TCP,
// W = 3-4 (blocks of 64-85 KiB), went from 0.66-0.83x of OpenMPI to 1.01-1.38x (AMX Xeon,
// 2 runs). Larger messages keep the rendezvous: at 256 KiB blocks, four eager pieces were
// slower (W = 4 all_gather of 1 MiB: 454-467 -> 500 us), the receiver buffering pieces
// that arrive before its receive is posted.
size_t message_piece_bytes(size_t bytes) {
  return bytes <= 2 * kEagerMessageBytes ? kEagerMessageBytes : kPieceBytes;
}

namespace {

// Between polls: nothing at first (latency matters for small messages), then yield, then
// short sleeps. With more ranks than cores the spinning phase is nearly skipped: a rank
// polling MPI steals the core its peer needs to send the data it waits for.
// The clock is first read when spinning ends, so a call done within the spin reads none.
class Pacer {
 public:
  explicit Pacer(bool oversubscribed)
      : spin_polls_(oversubscribed ? 16 : 4096),
        yield_for_(oversubscribed ? std::chrono::milliseconds(1) : std::chrono::milliseconds(20)) {}

  void pause() {
    if (polls_ < spin_polls_) {
      if (++polls_ == spin_polls_) start_ = Clock::now();
      return;
    }
    if (Clock::now() - start_ < yield_for_) {
      sched_yield();
      return;
    }
    // Short: Open MPI moves bytes only while we are inside MPI_Testsome.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  Clock::time_point start_;
  int polls_ = 0;
  int spin_polls_;
  Clock::duration yield_for_;
};

enum class Polled { kDone, kTimedOut, kStopped, kInterrupted };

// Polls count requests until every one is complete (kDone), timeout_s seconds pass without
// any completing (kTimedOut), rules.stop records a failure (kStopped), or the host's
// interrupt check answers (kInterrupted, its answer in *why); the unfinished
// requests are then left as they are. The clock (and the stop) is read every 64 idle polls
// only, not per poll nor per completion: at 64 B over TCP a call polls for a few
// microseconds and reads no clock. The timeout is counted from the first such reading
// after the last completion (64 polls late at most). peers: per request, or null (for the
// message of an MPI error, test_some).
Polled poll(MPI_Request* requests, const int* peers, size_t count, const WaitRules& rules,
            const char* op, int rank, std::string* why) {
  if (count == 0) return Polled::kDone;
  InterruptPoll interrupt;
  Pacer pacer(rules.oversubscribed);
  const auto timeout = std::chrono::seconds(rules.timeout_s);
  Clock::time_point idle_since;
  bool timing = false;  // idle_since is set: no completion since it was read
  for (unsigned idle = 0;;) {
    const int n_done = test_some(requests, count, op, rank, peers);
    if (n_done == MPI_UNDEFINED) return Polled::kDone;  // no active request left
    if (n_done > 0) {
      timing = false;
    } else if ((++idle & 63u) == 0) {
      if (rules.stop != nullptr && rules.stop->failed()) return Polled::kStopped;
      const auto now = Clock::now();
      if (*why = interrupt.poll(now); !why->empty()) return Polled::kInterrupted;
      if (!timing) {
        idle_since = now;
        timing = true;
      } else if (now - idle_since >= timeout) {
        return Polled::kTimedOut;
      }
    }
    pacer.pause();
  }
}

}  // namespace

namespace {
std::atomic<bool> g_peer_unresponsive{false};
}  // namespace

void note_peer_unresponsive() {
  g_peer_unresponsive.store(true);
}

bool peer_unresponsive() {
  return g_peer_unresponsive.load();
}

void keep_until_exit(std::shared_ptr<void> memory) {
  static std::mutex mu;
  static auto* const kept = new std::vector<std::shared_ptr<void>>;
  const std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(memory));
}

void check(int rc, const char* call, const char* op, int rank) {
  if (rc == MPI_SUCCESS) return;
  note_peer_unresponsive();
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  detail::throw_status(Status::kRuntimeError,
                       detail::cat(op, "(rank ", rank, "): ", call, " failed: ", text));
}

int test_some(MPI_Request* requests, size_t count, const char* op, int rank, const int* peers) {
  // Which completed: kept per thread, grown only, since a wait polls this many times per
  // microsecond (a per-call array spilled to the heap on every poll past 32 requests).
  thread_local std::vector<int> done;
  if (done.size() < count) done.resize(count);
  int n_done = 0;
  // No statuses on the way (polled a few times per microsecond-scale call): where one failed,
  // the indices still say which requests MPI completed in this call, the failed one among them.
  const int rc =
      MPI_Testsome(static_cast<int>(count), requests, &n_done, done.data(), MPI_STATUSES_IGNORE);
  if (rc == MPI_ERR_IN_STATUS && peers != nullptr && n_done > 0 && n_done != MPI_UNDEFINED) {
    std::vector<int> ranks;
    for (int i = 0; i < n_done; ++i) ranks.push_back(peers[done[i]]);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    const std::string call =
        detail::cat("MPI_Testsome on ", ranks.size() == 1 ? "a transfer" : "transfers", " with ",
                    detail::rank_list(ranks));
    check(rc, call.c_str(), op, rank);
  }
  check(rc, "MPI_Testsome", op, rank);
  return n_done;
}

void wait_all(std::vector<MPI_Request>& requests, const char* op, int rank, int timeout_s,
              bool oversubscribed) {
  std::string why;
  const Polled polled = poll(requests.data(), nullptr, requests.size(),
                             WaitRules{timeout_s, oversubscribed}, op, rank, &why);
  if (polled == Polled::kDone) return;
  // Nonblocking collectives' requests may be neither cancelled nor freed (MPI-3.1 §5.12):
  // left to the caller, which abandons them with their buffers (mpi_comm.cpp).
  note_peer_unresponsive();
  if (polled == Polled::kInterrupted)
    detail::throw_status(Status::kRuntimeError,
                         detail::cat(op, "(rank ", rank, "): ",
                                     interrupted_message(why, "waiting for the other ranks")));
  detail::throw_status(Status::kRuntimeError,
                       detail::cat(op, "(rank ", rank, "): timed out after ", timeout_s,
                                   " s (COMMFUSE_TIMEOUT_S) waiting for the other ranks"));
}

Batch::Batch(MPI_Comm comm, int tag, int rank, const char* op, const WaitRules& rules)
    : comm_(comm), tag_(tag), rank_(rank), op_(op), rules_(rules) {}

Batch::~Batch() {
  cancel();
}

void Batch::send(int peer, const void* buf, size_t bytes) {
  // MPI_Isend takes a non-const pointer only for MPI-2 compatibility; it does not write.
  post(peer, const_cast<void*>(buf), bytes, false);
}

void Batch::recv(int peer, void* buf, size_t bytes) {
  post(peer, buf, bytes, true);
}

void Batch::recv_piece(int peer, void* buf, size_t bytes) {
  CF_ASSERT(bytes <= kPieceBytes);
  post_one(peer, buf, static_cast<int>(bytes), true);
}

void Batch::post(int peer, void* buf, size_t bytes, bool is_recv) {
  auto* p = static_cast<unsigned char*>(buf);
  const size_t piece = message_piece_bytes(bytes);
  for (size_t off = 0; off < bytes; off += piece)
    post_one(peer, p + off, static_cast<int>(std::min(piece, bytes - off)), is_recv);
}

void Batch::post_one(int peer, void* buf, int bytes, bool is_recv) {
  MPI_Request req = MPI_REQUEST_NULL;
  if (is_recv)
    check(MPI_Irecv(buf, bytes, MPI_BYTE, peer, tag_, comm_, &req), "MPI_Irecv", op_, rank_);
  else
    check(MPI_Isend(buf, bytes, MPI_BYTE, peer, tag_, comm_, &req), "MPI_Isend", op_, rank_);
  requests_.push_back(req);
  peer_.push_back(peer);
  is_recv_.push_back(is_recv);
}

void Batch::progress() {
  if (!requests_.empty()) test_some(requests_.data(), requests_.size(), op_, rank_, peer_.data());
}

void Batch::wait() {
  std::string why;
  const Polled polled =
      poll(requests_.data(), peer_.data(), requests_.size(), rules_, op_, rank_, &why);
  if (polled == Polled::kDone) {
    requests_.clear();
    peer_.clear();
    is_recv_.clear();
    return;
  }
  // Either way sends may stay unmatched, and MPI_Finalize would wait for them.
  note_peer_unresponsive();
  if (polled == Polled::kStopped)
    detail::throw_status(Status::kRuntimeError,
                         detail::cat(op_, "(rank ", rank_, "): ", rules_.stop->reason()));
  if (polled == Polled::kInterrupted)
    detail::throw_status(
        Status::kRuntimeError,
        detail::cat(op_, "(rank ", rank_,
                    "): ", interrupted_message(why, detail::cat("waiting for ", missing_peers()))));
  detail::throw_status(Status::kRuntimeError,
                       detail::cat(op_, "(rank ", rank_, "): timed out after ", rules_.timeout_s,
                                   " s (COMMFUSE_TIMEOUT_S) waiting for ", missing_peers()));
}

std::string Batch::missing_peers() const {
  // Receives name the ranks we did not hear from; if only sends are stuck, the ranks that
  // did not take our data.
  for (const bool recv : {true, false}) {
    std::vector<int> ranks;
    for (size_t i = 0; i < requests_.size(); ++i)
      if (requests_[i] != MPI_REQUEST_NULL && (is_recv_[i] != 0) == recv) ranks.push_back(peer_[i]);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    if (ranks.empty()) continue;
    const std::string s = detail::rank_list(ranks);
    return recv ? s : s + " to take rank " + std::to_string(rank_) + "'s data";
  }
  return "the other ranks";
}

void Batch::cancel() noexcept {
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    if (is_recv_[i] != 0) MPI_Cancel(&requests_[i]);
    MPI_Request_free(&requests_[i]);
  }
  requests_.clear();
}

}  // namespace commfuse::comm::mpi
#endif  // COMMFUSE_HAVE_MPI
