#if COMMFUSE_HAVE_MPI
#include "comm/mpi/mpi_pipeline.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "comm/interrupt.hpp"
#include "comm/mpi/mpi_requests.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::comm::mpi {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMaxMessage = uint64_t{1} << 30;  // MPI counts are int
// How long an abandoned pipeline waits for receives MPI matched but could not cancel.
constexpr std::chrono::milliseconds kAbandonGrace{100};

// Posts t (in messages within MPI's int counts), appending each request to out and its peer
// to peers.
void post(MPI_Comm comm, int tag, const Pipeline::Transfer& t, bool is_recv,
          std::vector<MPI_Request>& out, std::vector<int>& peers, const char* op, int rank) {
  for (uint64_t off = 0; off < t.bytes; off += kMaxMessage) {
    const int n = static_cast<int>(std::min(kMaxMessage, t.bytes - off));
    MPI_Request r = MPI_REQUEST_NULL;
    if (is_recv)
      check(MPI_Irecv(t.buf + off, n, MPI_BYTE, t.peer, tag, comm, &r), "MPI_Irecv", op, rank);
    else
      check(MPI_Isend(t.buf + off, n, MPI_BYTE, t.peer, tag, comm, &r), "MPI_Isend", op, rank);
    out.push_back(r);
    peers.push_back(t.peer);
  }
}

// Tests requests (peers: each one's); completed ones become MPI_REQUEST_NULL. True if all
// are complete, *progressed set if any completed in this call.
bool test_all(std::vector<MPI_Request>& reqs, const std::vector<int>& peers, bool* progressed,
              const char* op, int rank) {
  if (reqs.empty()) return true;
  const int n = test_some(reqs.data(), reqs.size(), op, rank, peers.data());
  if (n == MPI_UNDEFINED) return true;
  if (n > 0) *progressed = true;
  return std::all_of(reqs.begin(), reqs.end(), [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
}

}  // namespace

int mpi_thread_level() {
  static const int provided = [] {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    return level;
  }();
  return provided;
}

bool mpi_allows_progress_thread() {
  return mpi_thread_level() >= MPI_THREAD_SERIALIZED;
}

bool use_progress_thread(std::string_view mode, int local_ranks, int cores, int override_threads) {
  if (mode != "auto") return mode == "on";
  // Never with more ranks than cores either (a 3-rank stream test on 2 cores: 0.7 s inline,
  // 6-14 s threaded).
  return kernels::cpu::core_left_free(override_threads, cores, local_ranks,
                                      kernels::cpu::allowed_compute_cores());
}

bool mpi_allows_any_thread() {
  return mpi_thread_level() >= MPI_THREAD_MULTIPLE;
}

Pipeline::Pipeline(MPI_Comm comm, int tag, int rank, const char* op, const WaitRules& rules,
                   size_t pieces)
    : comm_(comm),
      tag_(tag),
      rank_(rank),
      op_(op),
      rules_(rules),
      threaded_(rules.progress_thread && mpi_allows_progress_thread()) {
  for (size_t i = 0; i < pieces; ++i) pieces_.push_back(std::make_unique<Piece>());
}

Pipeline::~Pipeline() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  // A pipeline abandoned by an exception: late data must not land in freed buffers. A
  // receive not yet matched is cancelled at once. One MPI already matched cannot be: it ends
  // only when its sender sends the rest (a large message's rendezvous), which a stalled peer
  // never does, so waiting for it (MPI_Wait) hung the survivor forever after its timeout. It
  // gets kAbandonGrace, then is released to finish in the background (docs/reliability.md:
  // a failed call's output may still be written while that peer lives).
  std::vector<MPI_Request> left;
  for (auto& p : pieces_)
    for (auto& r : p->recv_reqs)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        left.push_back(r);
        r = MPI_REQUEST_NULL;
      }
  const auto until = Clock::now() + kAbandonGrace;
  while (!left.empty()) {
    std::erase_if(left, [](MPI_Request& r) {
      int done = 0;
      return MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done != 0;
    });
    if (left.empty() || Clock::now() >= until) break;
    sched_yield();
  }
  if (!left.empty()) note_peer_unresponsive();
  for (auto& r : left) MPI_Request_free(&r);
  for (auto& r : send_reqs_)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

void Pipeline::expect(size_t piece, Transfer t) {
  pieces_[piece]->recvs.push_back(t);
}

void Pipeline::start() {
  if (threaded_) {
    // The thread makes every MPI call from here to finish(): SERIALIZED is respected
    // because the caller makes none meanwhile.
    thread_ = std::thread([this] { thread_main(); });
    return;
  }
  for (auto& p : pieces_)
    for (const Transfer& t : p->recvs)
      post(comm_, tag_, t, true, p->recv_reqs, p->recv_peers, op_, rank_);
}

void Pipeline::send(size_t piece, std::vector<Transfer> sends) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pieces_[piece]->sends = std::move(sends);
    pieces_[piece]->sends_ready = true;
  }
  if (!threaded_) step();
}

void Pipeline::poll() {
  if (!threaded_) step();
}

bool Pipeline::step() {
  bool progressed = false;
  while (next_send_ < pieces_.size()) {
    Piece& p = *pieces_[next_send_];
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!p.sends_ready) break;
    }
    for (const Transfer& t : p.sends)
      post(comm_, tag_, t, false, send_reqs_, send_peers_, op_, rank_);
    p.sent = true;
    ++next_send_;
  }
  // Only the next few pieces: every MPI test call drives all of Open MPI's progress (a
  // socket poll), so testing each of hundreds of pieces per pass cost more than the data.
  while (first_pending_ < pieces_.size() &&
         pieces_[first_pending_]->arrived.load(std::memory_order_relaxed))
    ++first_pending_;
  for (size_t i = first_pending_; i < std::min(pieces_.size(), first_pending_ + 4); ++i) {
    Piece& p = *pieces_[i];
    if (!p.arrived.load(std::memory_order_relaxed) &&
        test_all(p.recv_reqs, p.recv_peers, &progressed, op_, rank_))
      p.arrived.store(true, std::memory_order_release);
  }
  test_all(send_reqs_, send_peers_, &progressed, op_, rank_);
  if (progressed) {  // drop finished sends (and their peers) so the lists stay short
    size_t kept = 0;
    for (size_t i = 0; i < send_reqs_.size(); ++i)
      if (send_reqs_[i] != MPI_REQUEST_NULL) {
        send_reqs_[kept] = send_reqs_[i];
        send_peers_[kept++] = send_peers_[i];
      }
    send_reqs_.resize(kept);
    send_peers_.resize(kept);
  }
  return progressed;
}

void Pipeline::thread_main() {
  try {
    for (auto& p : pieces_)
      for (const Transfer& t : p->recvs)
        post(comm_, tag_, t, true, p->recv_reqs, p->recv_peers, op_, rank_);
    auto last = Clock::now();
    int idle = 0;
    while (!stop_.load(std::memory_order_acquire)) {
      if (step()) {
        last = Clock::now();
        idle = 0;
      }
      const bool all_in = std::all_of(pieces_.begin(), pieces_.end(), [](const auto& p) {
        return p->arrived.load(std::memory_order_relaxed);
      });
      const bool all_out = next_send_ == pieces_.size() &&
                           std::all_of(send_reqs_.begin(), send_reqs_.end(),
                                       [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
      if (all_in && all_out) break;
      if (stopped()) {  // aborted from another thread: the caller's wait fails with it
        failure_ = stop_reason();
        failed_.store(true, std::memory_order_release);
        break;
      }
      if (Clock::now() - last > std::chrono::seconds(rules_.timeout_s)) {
        // Nothing moved for the whole deadline: name the peers whose data is missing (or,
        // with everything received, say our data was not taken).
        size_t i = 0;
        while (i < pieces_.size() && pieces_[i]->arrived.load()) ++i;
        failure_ = timed_out(i < pieces_.size() ? missing_what(i, true) : untaken());
        failed_.store(true, std::memory_order_release);
        break;
      }
      // The caller computes on this core: poll briskly a while, then back off.
      if (++idle > (rules_.oversubscribed ? 16 : 256))
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      else
        sched_yield();
    }
  } catch (const std::exception& e) {  // an exception must not leave the thread
    failure_ = e.what();
    failed_.store(true, std::memory_order_release);
  } catch (...) {
    failure_ = detail::cat(op_, "(rank ", rank_, "): progress thread failed");
    failed_.store(true, std::memory_order_release);
  }
  {
    const std::lock_guard<std::mutex> lock(done_mu_);
    done_.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
}

std::string Pipeline::timed_out(const std::string& waiting) const {
  return detail::cat(op_, "(rank ", rank_, "): timed out after ", rules_.timeout_s,
                     " s (COMMFUSE_TIMEOUT_S) ", waiting);
}

std::string Pipeline::interrupted(const std::string& why, const std::string& waiting) const {
  return detail::cat(op_, "(rank ", rank_, "): ", interrupted_message(why, waiting));
}

std::string Pipeline::untaken() const {
  return detail::cat("waiting for the peers to take rank ", rank_, "'s data");
}

std::string Pipeline::missing_what(size_t piece, bool own_requests) const {
  const Piece& p = *pieces_[piece];
  // The requests are the progress thread's while it runs: then every sender of the piece.
  // (A transfer past MPI's int counts is several requests, each with its peer.)
  std::vector<int> ranks;
  if (own_requests) {
    for (size_t i = 0; i < p.recv_reqs.size(); ++i)
      if (p.recv_reqs[i] != MPI_REQUEST_NULL) ranks.push_back(p.recv_peers[i]);
  } else {
    for (const Transfer& t : p.recvs) ranks.push_back(t.peer);
  }
  std::sort(ranks.begin(), ranks.end());  // queued rank - k mod R: descending, rotated
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return "waiting for " + detail::rank_list(ranks);
}

std::string Pipeline::stop_reason() const {
  return detail::cat(op_, "(rank ", rank_, "): ", rules_.stop->reason());
}

void Pipeline::fail(const std::string& why) {
  note_peer_unresponsive();
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  detail::throw_status(Status::kRuntimeError, why);
}

void Pipeline::wait(size_t piece) {
  Piece& p = *pieces_[piece];
  auto last = Clock::now();
  int polls = 0;
  InterruptPoll interrupt;
  while (!p.arrived.load(std::memory_order_acquire)) {
    if (const std::string why = interrupt.poll(); !why.empty())
      fail(interrupted(why, missing_what(piece, !threaded_)));
    if (threaded_) {
      if (failed_.load(std::memory_order_acquire)) fail(failure_);
      if (++polls > 64)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      else
        sched_yield();
      // The thread owns the deadline; this is only a backstop should it have stopped. A
      // thread that failed set failed_ before done_: its reason, not "stopped" (seen: the
      // thread's stop on an abort read as "transfer stopped" when it came between the two
      // checks).
      if (done_.load() && !p.arrived.load()) {
        if (failed_.load(std::memory_order_acquire)) fail(failure_);
        fail(detail::cat(op_, "(rank ", rank_, "): transfer stopped"));
      }
    } else {
      if (step()) last = Clock::now();
      if (stopped()) fail(stop_reason());
      if (Clock::now() - last > std::chrono::seconds(rules_.timeout_s))
        fail(timed_out(missing_what(piece, true)));
      back_off(++polls);
    }
  }
}

void Pipeline::finish() {
  if (threaded_) {
    // The thread owns the deadline; this rank's own sends not taken by a late peer would
    // keep it waiting that long, so Ctrl-C is polled meanwhile (as by the inline waits).
    InterruptPoll interrupt;
    {
      std::unique_lock<std::mutex> lock(done_mu_);
      while (!done_.load(std::memory_order_acquire)) {
        done_cv_.wait_for(lock, std::chrono::milliseconds(kInterruptSliceMs));
        if (done_.load(std::memory_order_acquire)) break;
        if (const std::string why = interrupt.poll(); !why.empty()) {
          lock.unlock();
          fail(interrupted(why, untaken()));
        }
      }
    }
    thread_.join();
    if (failed_.load()) detail::throw_status(Status::kRuntimeError, failure_);
    return;
  }
  auto last = Clock::now();
  int polls = 0;
  InterruptPoll interrupt;
  while (!std::all_of(send_reqs_.begin(), send_reqs_.end(),
                      [](MPI_Request r) { return r == MPI_REQUEST_NULL; })) {
    if (step()) last = Clock::now();
    if (const std::string why = interrupt.poll(); !why.empty()) fail(interrupted(why, untaken()));
    if (stopped()) fail(stop_reason());
    if (Clock::now() - last > std::chrono::seconds(rules_.timeout_s)) fail(timed_out(untaken()));
    back_off(++polls);
  }
}

void Pipeline::back_off(int polls) const {
  // Spin briefly (latency), then yield, then sleep: with more runnable processes than cores
  // sched_yield alone does not hand the core to the peer that has to send our data
  // (measured: a 3-rank stream test took 27 s yielding, under a second sleeping).
  const int spin = rules_.oversubscribed ? 16 : 4096;
  if (polls <= spin) return;
  if (polls <= spin + 64)
    sched_yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace commfuse::comm::mpi
#endif  // COMMFUSE_HAVE_MPI
