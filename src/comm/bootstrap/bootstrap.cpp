#include "comm/bootstrap/bootstrap.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <new>
#include <string>

#include "comm/bootstrap/bootstrap_internal.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace commfuse::comm {

namespace boot {

std::string io_reason(net::Io io, int err) {
  switch (io) {
    case net::Io::kClosed:
      return err != 0 ? net::errno_text(err) : "connection closed";
    case net::Io::kError:
      return err != 0 ? net::errno_text(err) : "malformed message";
    case net::Io::kWouldBlock:
      return "timed out";
    case net::Io::kOk:
      break;
  }
  return "no error";
}

}  // namespace boot

namespace {

// Files this process has open now (/proc/self/fd, less the directory's own); 16 where it
// cannot be read.
rlim_t open_files() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 16;
  rlim_t n = 0;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n > 0 ? n - 1 : 0;
}

// Rank 0 holds a connection to every other rank while the group forms, besides its listener
// and the files already open: where the soft RLIMIT_NOFILE is short of that it is raised
// (up to the hard limit: accept() had failed with EMFILE there), and a world past the hard
// limit is refused before anything is allocated for it (a worldSize of 2e9 grew rank 0 to
// 24 GB until the kernel killed it): the refusal, or "". The other ranks hold one connection
// each.
std::string open_files_refusal(int world_size) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return {};
  constexpr rlim_t kSlack = 16;  // the listener, and what creating the communicator opens
  const auto connections = static_cast<rlim_t>(world_size - 1);
  const rlim_t needed = connections + open_files() + kSlack;
  if (needed <= limit.rlim_cur) return {};
  if (limit.rlim_max == RLIM_INFINITY || needed <= limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(limit.rlim_max, needed);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      CF_LOG(kInfo, "bootstrap(rank 0): RLIMIT_NOFILE raised from ", limit.rlim_cur, " to ",
             raised.rlim_cur, " for the ", connections, " connections of a group of ", world_size);
      return {};
    }
  }
  return detail::cat(
      "bootstrap(rank 0): world_size is ", world_size, ", which needs ", connections,
      " connections at rank 0 while the group forms (", needed,
      " open files in all), but this process may open ", limit.rlim_cur,
      " (RLIMIT_NOFILE, hard limit ",
      limit.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(limit.rlim_max),
      ", not raised)");
}

}  // namespace

Bootstrap::Bootstrap(std::string host, int port, int rank, int world_size, int timeout_s)
    : host_(std::move(host)),
      port_(port),
      rank_(rank),
      world_size_(world_size),
      timeout_s_(timeout_s) {}

Bootstrap::~Bootstrap() = default;

std::unique_ptr<Bootstrap> Bootstrap::create(const std::string& host, int port, int rank,
                                             int world_size, int timeout_s) {
  CF_CHECK_ARG(world_size >= 1, "bootstrap: world_size is ", world_size, " but must be >= 1");
  CF_CHECK_ARG(rank >= 0 && rank < world_size, "bootstrap: rank is ", rank, " but world_size is ",
               world_size, " (rank must be in [0, ", world_size, "))");
  CF_CHECK_ARG(port >= 1 && port <= 65535, "bootstrap(rank ", rank, "): port is ", port,
               " but must be in [1, 65535]");
  CF_CHECK_ARG(!host.empty(), "bootstrap(rank ", rank, "): host is empty");
  CF_CHECK_ARG(timeout_s >= 1, "bootstrap(rank ", rank, "): timeout_s is ", timeout_s,
               " but must be >= 1");
  if (rank == 0 && world_size > 1)
    if (const std::string refusal = open_files_refusal(world_size); !refusal.empty())
      boot::refuse_group(host, port, world_size, Status::kParamInvalid, refusal);
  std::unique_ptr<Bootstrap> b(new Bootstrap(host, port, rank, world_size, timeout_s));
  if (world_size == 1) return b;
  if (rank == 0)
    b->root_accept();
  else
    b->peer_join();
  CF_LOG(kDebug, b->who(), ": group of ", world_size, " formed via ", net::host_port(host, port));
  return b;
}

std::string Bootstrap::who() const {
  return detail::cat("bootstrap(rank ", rank_, ")");
}

void Bootstrap::check_usable() const {
  if (!broken_.empty())
    detail::throw_status(Status::kRuntimeError,
                         detail::cat(who(), ": unusable after an earlier error: ", broken_));
}

std::vector<std::string> Bootstrap::collective(wire::FrameType op, const std::string& blob) {
  check_usable();
  ++seq_;
  if (world_size_ == 1) return {blob};
  try {
    return rank_ == 0 ? root_collective(op, blob) : peer_collective(op, blob);
  } catch (const std::bad_alloc&) {
    // Out of memory holding the blobs: a RuntimeFailure naming this rank, and the group told
    // as for any failure (rank 0 sends every peer why; a peer's closed connection is named
    // on rank 0), not a bare bad_alloc that leaves the peers reading a silent connection.
    const std::string why =
        detail::cat(who(), ": out of memory during ", wire::frame_name(op), " #", seq_);
    if (rank_ == 0) root_fail(Status::kRuntimeError, why);
    peer_fail(Status::kRuntimeError, why);
  }
}

std::vector<std::string> Bootstrap::all_gather(const std::string& blob) {
  return collective(wire::FrameType::kAllGather, blob);
}

void Bootstrap::barrier() {
  collective(wire::FrameType::kBarrier, std::string());
}

}  // namespace commfuse::comm
