// Rank 0's half of the bootstrap: forming the group and serving collectives.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/bootstrap_internal.hpp"
#include "comm/interrupt.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace commfuse::comm {
namespace {

using boot::kErrorGrace;
using boot::kErrorLinger;
using boot::kRejoinGrace;

// Starts delivering an error: the message, then FIN. The connection stays open so that
// drain_and_close() can read what the peer still sends.
void tell_error(const net::Fd& fd, Status code, const std::string& message, net::Deadline d) {
  int err = 0;
  wire::send_frame(fd.get(), wire::FrameType::kError, 0, wire::encode_error(code, message), d,
                   &err);
  shutdown(fd.get(), SHUT_WR);
}

// Reads and discards what a readable connection holds; closes it once its peer has closed
// (or it failed).
void discard_input(net::Fd* fd) {
  char sink[4096];
  size_t got = 0;
  int err = 0;
  net::Io io;
  do io = net::recv_some(fd->get(), sink, sizeof(sink), &got, &err);
  while (io == net::Io::kOk);
  if (io != net::Io::kWouldBlock) fd->reset();
}

// Closing a socket with unread input sends a reset, and a reset may make the peer drop
// the error message we just sent. So read (and discard) until each peer closes or the
// deadline passes, then close.
void drain_and_close(std::vector<net::Fd>* fds, net::Deadline deadline) {
  std::vector<net::Fd*> open;
  for (auto& fd : *fds)
    if (fd.valid()) open.push_back(&fd);
  while (!open.empty() && !deadline.expired()) {
    std::vector<pollfd> pfds;
    for (auto* fd : open) pfds.push_back({fd->get(), POLLIN, 0});
    if (poll(pfds.data(), pfds.size(), deadline.remaining_ms()) < 0 && errno != EINTR) break;
    for (size_t i = 0; i < pfds.size(); ++i)
      if (pfds[i].revents != 0) discard_input(open[i]);
    std::erase_if(open, [](net::Fd* fd) { return !fd->valid(); });
  }
  for (auto& fd : *fds) fd.reset();
}

// A connection that has been accepted but has not yet said who it is.
struct Pending {
  net::Fd fd;
  wire::FrameReader reader{wire::kMaxHelloPayload};
};

}  // namespace

namespace boot {

void refuse_group(const std::string& host, int port, int world_size, Status code,
                  const std::string& message) {
  std::string listen_error;
  net::Fd listener = net::listen_tcp(host, port, &listen_error);
  const net::Deadline linger = net::Deadline::after(kErrorLinger);
  // Connections told and not yet closed by their rank, read together (one that never closes
  // must not keep the others from being told); at most kOpen at a time, so that the refusal
  // itself needs few files.
  constexpr size_t kOpen = 64;
  std::vector<net::Fd> told;
  int answered = 0;
  comm::InterruptPoll interrupt;  // Ctrl-C ends the linger
  while (listener.valid() && !linger.expired() && (answered < world_size - 1 || !told.empty())) {
    const bool accepting = answered < world_size - 1 && told.size() < kOpen;
    std::vector<pollfd> pfds{{accepting ? listener.get() : -1, POLLIN, 0}};
    for (const auto& fd : told) pfds.push_back({fd.get(), POLLIN, 0});
    if (poll(pfds.data(), pfds.size(), std::min(linger.remaining_ms(), comm::kInterruptSliceMs)) <
            0 &&
        errno != EINTR)
      break;
    if (!interrupt.poll().empty()) break;
    // What a told rank still sends (its hello) is read, so that closing does not reset the
    // connection under the message; it closes once it has read the error.
    for (size_t i = 1; i < pfds.size(); ++i)
      if (pfds[i].revents != 0) discard_input(&told[i - 1]);
    std::erase_if(told, [](const net::Fd& fd) { return !fd.valid(); });
    if (accepting && pfds[0].revents != 0)
      for (net::Fd c = net::accept_tcp(listener.get()); c.valid();
           c = told.size() < kOpen ? net::accept_tcp(listener.get()) : net::Fd()) {
        tell_error(c, code, message, net::Deadline::after(kErrorGrace).earlier(linger));
        told.push_back(std::move(c));
        ++answered;
      }
  }
  detail::throw_status(code, message);
}

}  // namespace boot

void Bootstrap::root_fail(Status code, const std::string& message) {
  const net::Deadline deadline = net::Deadline::after(kErrorGrace);
  for (auto& fd : peers_)
    if (fd.valid()) tell_error(fd, code, message, deadline);
  drain_and_close(&peers_, deadline);
  broken_ = message;
  detail::throw_status(code, message);
}

void Bootstrap::root_accept() {
  std::string listen_error;
  net::Fd listener = net::listen_tcp(host_, port_, &listen_error);
  if (!listener.valid())
    detail::throw_status(Status::kRuntimeError,
                         detail::cat(who(), ": cannot listen on ", net::host_port(host_, port_),
                                     ": ", listen_error));
  peers_.resize(static_cast<size_t>(world_size_));
  const net::Deadline deadline = net::Deadline::after(std::chrono::seconds(timeout_s_));

  int joined = 0;
  // A fatal error found while forming the group, and the late arrivals already told.
  std::optional<std::pair<Status, std::string>> verdict;
  std::vector<net::Fd> told;
  // The ranks (1..) whose hello came, each once: a verdict is told until every rank that
  // could be in the group has heard it (a count of hellos, duplicates included, ended the
  // telling before a real rank arrived, which then waited out its timeout).
  std::set<int64_t> arrived;
  // The ranks that joined and then closed their connection, with when their grace ends: their
  // places are open again (a restarted rank takes it), for kRejoinGrace.
  std::map<int, net::Deadline> left;
  int largest_world = world_size_;
  net::Deadline linger = deadline;

  // Handles one complete first frame from a new connection.
  auto on_hello = [&](net::Fd fd, const wire::Frame& frame) {
    wire::Hello h;
    if (frame.type != wire::FrameType::kHello || !wire::decode_hello(frame.payload, &h)) {
      CF_LOG(kWarn, who(), ": ignoring a connection that did not start with a bootstrap hello");
      return;
    }
    if (h.rank >= 1 && h.rank < std::max<int64_t>(world_size_, h.world_size))
      arrived.insert(h.rank);
    largest_world = std::max(largest_world, static_cast<int>(h.world_size));
    if (!verdict) {
      std::string msg;
      if (h.version != wire::kVersion)
        msg = detail::cat("bootstrap: rank ", h.rank, " speaks bootstrap protocol version ",
                          h.version, " but rank 0 speaks ", wire::kVersion,
                          " (mixed commfuse versions)");
      else if (h.world_size != world_size_)
        msg = detail::cat("bootstrap: rank ", h.rank, " was started with world_size ", h.world_size,
                          " but rank 0 has ", world_size_);
      else if (h.rank < 0 || h.rank >= world_size_)
        msg = detail::cat("bootstrap: a process claims rank ", h.rank, " but world_size is ",
                          world_size_);
      else if (h.rank == 0 || peers_[static_cast<size_t>(h.rank)].valid())
        msg = detail::cat("bootstrap: two processes claim rank ", h.rank);
      if (msg.empty()) {
        peers_[static_cast<size_t>(h.rank)] = std::move(fd);
        left.erase(static_cast<int>(h.rank));
        ++joined;
        return;
      }
      verdict.emplace(Status::kParamInvalid, msg);
      linger = deadline.earlier(net::Deadline::after(kErrorLinger));
      const net::Deadline send_by = net::Deadline::after(kErrorGrace);
      for (auto& p : peers_) {
        if (!p.valid()) continue;
        tell_error(p, verdict->first, verdict->second, send_by);
        told.push_back(std::move(p));
      }
    }
    tell_error(fd, verdict->first, verdict->second, net::Deadline::after(kErrorGrace));
    told.push_back(std::move(fd));
  };

  auto missing = [&] {
    std::vector<int> ranks;
    for (int r = 1; r < world_size_; ++r)
      if (!peers_[static_cast<size_t>(r)].valid()) ranks.push_back(r);
    return detail::rank_list(ranks);
  };
  std::vector<Pending> pending;
  comm::InterruptPoll interrupt;  // Ctrl-C while peers are missing (a rank not started)
  // "rank 1 connected, then closed its connection while the group formed" for the ranks
  // that left and did not come back.
  auto left_text = [&] {
    std::vector<int> ranks;
    for (const auto& [r, at] : left) ranks.push_back(r);
    return detail::cat(detail::rank_list(ranks), " connected, then closed ",
                       ranks.size() == 1 ? "its connection" : "their connections",
                       " while the group formed");
  };
  for (;;) {
    if (!verdict && joined == world_size_ - 1) break;
    // Only ranks that left are missing, and none came back within the grace: said now, not
    // at COMMFUSE_TIMEOUT_S as "did not connect" (they did).
    if (!verdict && !left.empty() && joined + static_cast<int>(left.size()) == world_size_ - 1 &&
        std::all_of(left.begin(), left.end(), [](const auto& e) { return e.second.expired(); })) {
      listener.reset();
      root_fail(Status::kRuntimeError,
                detail::cat(who(), ": ", left_text(), ", and did not connect again within ",
                            std::chrono::duration<double>(kRejoinGrace).count(), " s"));
    }
    // Everyone that could be in this group has heard the verdict (or stopped coming).
    if (verdict && (static_cast<int64_t>(arrived.size()) >= largest_world - 1 || linger.expired()))
      break;
    if (deadline.expired()) break;

    std::vector<pollfd> pfds{{listener.get(), POLLIN, 0}};
    for (const auto& p : pending) pfds.push_back({p.fd.get(), POLLIN, 0});
    // The ranks that joined say nothing until the welcome: one readable now has closed (or
    // broke the protocol). Watched so that a rank stopped and started again while the
    // group forms takes its place again (its first connection had kept the place, and the
    // new one was "two processes claim rank r").
    const size_t first_joined = pfds.size();
    std::vector<int> joined_ranks;
    if (!verdict)
      for (int r = 1; r < world_size_; ++r)
        if (peers_[static_cast<size_t>(r)].valid()) {
          pfds.push_back({peers_[static_cast<size_t>(r)].get(), POLLIN, 0});
          joined_ranks.push_back(r);
        }
    const net::Deadline wait_until = verdict ? linger : deadline;
    if (poll(pfds.data(), pfds.size(),
             std::min(wait_until.remaining_ms(), comm::kInterruptSliceMs)) < 0 &&
        errno != EINTR)
      detail::throw_status(Status::kRuntimeError,
                           detail::cat(who(), ": poll failed: ", net::errno_text(errno)));
    if (!verdict)
      if (const std::string why = interrupt.poll(); !why.empty()) {
        listener.reset();
        root_fail(Status::kRuntimeError,
                  detail::cat(who(), ": ",
                              comm::interrupted_message(
                                  why, detail::cat("waiting for ", missing(), " to connect"))));
      }
    for (size_t i = first_joined; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      const int r = joined_ranks[i - first_joined];
      char byte = 0;
      const ssize_t got = recv(pfds[i].fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (got > 0)  // not a commfuse rank (it waits for the welcome): dropped, not spun on
        CF_LOG(kWarn, who(), ": the process that joined as rank ", r,
               " sent data before the group formed; dropped, its place is open again");
      else
        CF_LOG(kWarn, who(), ": rank ", r,
               " closed its connection while the group formed; its place is open again");
      peers_[static_cast<size_t>(r)].reset();
      arrived.erase(r);
      left.insert_or_assign(r, deadline.earlier(net::Deadline::after(kRejoinGrace)));
      --joined;
    }
    // Pending entries first: their indices in pfds are only valid before we add new ones.
    for (size_t i = 1; i < first_joined; ++i) {
      if (pfds[i].revents == 0) continue;
      Pending& p = pending[i - 1];
      int err = 0;
      const net::Io io = p.reader.feed(p.fd.get(), &err);
      if (io == net::Io::kWouldBlock) continue;
      if (io == net::Io::kOk) {
        on_hello(std::move(p.fd), p.reader.take());
      } else {
        CF_LOG(kDebug, who(),
               ": dropped a connection before its hello: ", boot::io_reason(io, err));
      }
      p.fd.reset();
    }
    std::erase_if(pending, [](const Pending& p) { return !p.fd.valid(); });
    if (pfds[0].revents != 0)
      for (net::Fd c = net::accept_tcp(listener.get()); c.valid();
           c = net::accept_tcp(listener.get()))
        pending.push_back(Pending{std::move(c)});
  }
  // No one else may join from here on; a new group can take the port at once.
  listener.reset();

  if (verdict) {
    drain_and_close(&told, net::Deadline::after(kErrorGrace));
    root_fail(verdict->first, verdict->second);
  }
  if (joined < world_size_ - 1) {
    // The ranks that left are among the missing: said so, apart from those never seen.
    const std::string also = left.empty() ? "" : detail::cat(" (", left_text(), ")");
    root_fail(Status::kRuntimeError, detail::cat(who(), ": ", missing(), " did not connect within ",
                                                 timeout_s_, " s", also));
  }
  for (int r = 1; r < world_size_; ++r) {
    int err = 0;
    const net::Io io = wire::send_frame(peers_[static_cast<size_t>(r)].get(),
                                        wire::FrameType::kWelcome, 0, {}, deadline, &err);
    if (io != net::Io::kOk)
      root_fail(Status::kRuntimeError,
                detail::cat(who(), ": lost connection to rank ", r, " while forming the group (",
                            boot::io_reason(io, err), ")"));
  }
}

std::vector<std::string> Bootstrap::root_collective(wire::FrameType op, const std::string& blob) {
  const char* op_name = wire::frame_name(op);
  const net::Deadline deadline = net::Deadline::after(std::chrono::seconds(timeout_s_));
  std::vector<std::string> blobs(static_cast<size_t>(world_size_));
  blobs[0] = blob;
  std::vector<wire::FrameReader> readers(static_cast<size_t>(world_size_));
  std::vector<int> waiting;  // ranks whose contribution has not arrived
  for (int r = 1; r < world_size_; ++r) waiting.push_back(r);

  // Read from all peers at once: a rank that died is noticed at once, whatever its number.
  comm::InterruptPoll interrupt;
  while (!waiting.empty()) {
    std::vector<pollfd> pfds;
    for (int r : waiting) pfds.push_back({peers_[static_cast<size_t>(r)].get(), POLLIN, 0});
    const int n =
        poll(pfds.data(), pfds.size(), std::min(deadline.remaining_ms(), comm::kInterruptSliceMs));
    if (n == 0 && !deadline.expired()) {
      if (const std::string why = interrupt.poll(); !why.empty())
        root_fail(Status::kRuntimeError,
                  detail::cat(who(), ": ",
                              comm::interrupted_message(
                                  why, detail::cat("waiting for ", detail::rank_list(waiting),
                                                   " at ", op_name, " #", seq_))));
      continue;
    }
    if (n < 0 && errno != EINTR)
      root_fail(Status::kRuntimeError,
                detail::cat(who(), ": poll failed: ", net::errno_text(errno)));
    if (n == 0 && deadline.expired())
      root_fail(Status::kRuntimeError,
                detail::cat(who(), ": ", detail::rank_list(waiting), " did not arrive at ", op_name,
                            " #", seq_, " within ", timeout_s_, " s"));
    std::vector<int> still_waiting;
    for (size_t i = 0; i < pfds.size(); ++i) {
      const int r = waiting[i];
      if (pfds[i].revents == 0) {
        still_waiting.push_back(r);
        continue;
      }
      int err = 0;
      wire::FrameReader& reader = readers[static_cast<size_t>(r)];
      const net::Io io = reader.feed(pfds[i].fd, &err);
      if (io == net::Io::kWouldBlock) {
        still_waiting.push_back(r);
        continue;
      }
      if (io != net::Io::kOk)
        root_fail(Status::kRuntimeError,
                  detail::cat(who(), ": lost connection to rank ", r, " during ", op_name, " (",
                              boot::io_reason(io, err), ")"));
      wire::Frame f = reader.take();
      if (f.type != op)
        root_fail(Status::kParamInvalid,
                  detail::cat("bootstrap: rank ", r, " called ", wire::frame_name(f.type),
                              " but rank 0 called ", op_name, " (collective #", seq_, ")"));
      if (f.seq != seq_)
        root_fail(Status::kInner, detail::cat("bootstrap: rank ", r, " sent collective #", f.seq,
                                              " but rank 0 is at #", seq_));
      blobs[static_cast<size_t>(r)] = std::move(f.payload);
    }
    waiting = std::move(still_waiting);
  }

  const std::string result =
      op == wire::FrameType::kBarrier ? std::string() : wire::encode_blobs(blobs);
  for (int r = 1; r < world_size_; ++r) {
    int err = 0;
    const net::Io io = wire::send_frame(peers_[static_cast<size_t>(r)].get(),
                                        wire::FrameType::kResult, seq_, result, deadline, &err);
    if (io == net::Io::kWouldBlock)
      root_fail(Status::kRuntimeError, detail::cat(who(), ": rank ", r, " did not take the ",
                                                   op_name, " result within ", timeout_s_, " s"));
    if (io != net::Io::kOk)
      root_fail(Status::kRuntimeError,
                detail::cat(who(), ": lost connection to rank ", r, " during ", op_name, " (",
                            boot::io_reason(io, err), ")"));
  }
  return blobs;
}

}  // namespace commfuse::comm
