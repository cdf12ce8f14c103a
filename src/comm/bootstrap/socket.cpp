#include "comm/bootstrap/socket.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <utility>

#include "comm/interrupt.hpp"
#include "core/error.hpp"

namespace commfuse::comm::net {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, int port, bool passive, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;  // IPv4 and IPv6 alike
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    *error = rc == EAI_SYSTEM ? errno_text(errno) : std::string(gai_strerror(rc));
    return nullptr;
  }
  return AddrInfoPtr(res);
}

void set_nodelay(int fd) {
  // Bootstrap messages are tiny request/response pairs; Nagle would add 40 ms stalls.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Linux can "connect" a socket to itself when the target port is in the ephemeral range
// and nobody listens (TCP simultaneous open); such a socket must not count as rank 0.
bool is_self_connected(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof(local), pl = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
  return ll == pl && std::memcmp(&local, &peer, ll) == 0;
}

// strerror_r is the GNU variant (returns the text, maybe not in buf) under glibc's default
// _GNU_SOURCE and the XSI one (returns 0 and fills buf) elsewhere; accept either.
[[maybe_unused]] const char* strerror_result(const char* text, const char*) {
  return text;
}
[[maybe_unused]] const char* strerror_result(int, const char* buf) {
  return buf;
}

// Waits for events on one fd until the deadline; returns the revents (0 on timeout). In
// slices of 100 ms, between which the host's interrupt check (Ctrl-C) may end the wait:
// RUNTIME_ERROR "interrupted (<why>) while waiting on a socket".
short poll_one(int fd, short events, Deadline deadline) {
  comm::InterruptPoll interrupt;
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, std::min(deadline.remaining_ms(), comm::kInterruptSliceMs));
    if (rc > 0) return p.revents;
    if (rc < 0 && errno != EINTR) return POLLERR;
    if (deadline.expired()) return 0;
    if (const std::string why = interrupt.poll(); !why.empty()) {
      const WaitContext* ctx = WaitContext::current();
      detail::throw_status(
          Status::kRuntimeError,
          ctx == nullptr
              ? comm::interrupted_message(why, "waiting on a socket")
              : detail::cat(ctx->who(), ": ", comm::interrupted_message(why, ctx->activity())));
    }
  }
}

thread_local const WaitContext* t_wait_context = nullptr;

}  // namespace

WaitContext::WaitContext(std::string who, std::string activity)
    : who_(std::move(who)), activity_(std::move(activity)), outer_(t_wait_context) {
  t_wait_context = this;
}

WaitContext::~WaitContext() {
  t_wait_context = outer_;
}

const WaitContext* WaitContext::current() {
  return t_wait_context;
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int Deadline::remaining_ms() const {
  const auto left = at_ - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string errno_text(int err) {
  char buf[256] = {};
  return strerror_result(strerror_r(err, buf, sizeof(buf)), buf);
}

Fd listen_tcp(const std::string& host, int port, std::string* error) {
  AddrInfoPtr addrs = resolve(host, port, /*passive=*/true, error);
  if (!addrs) return Fd();
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      *error = errno_text(errno);
      continue;
    }
    // Connections of a previous group on this port linger in TIME_WAIT; without
    // SO_REUSEADDR a quick re-creation would fail with EADDRINUSE. A live listener
    // still conflicts, which is the error we want to report.
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), SOMAXCONN) != 0) {
      *error = errno_text(errno);
      continue;
    }
    return fd;
  }
  return Fd();
}

Fd connect_tcp(const std::string& host, int port, Deadline deadline, std::string* error) {
  AddrInfoPtr addrs = resolve(host, port, /*passive=*/false, error);
  if (!addrs) return Fd();
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      *error = errno_text(errno);
      continue;
    }
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *error = errno_text(errno);
        continue;
      }
      if ((poll_one(fd.get(), POLLOUT, deadline) & (POLLOUT | POLLERR | POLLHUP)) == 0) {
        *error = "connection attempt timed out";
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        *error = errno_text(so_error);
        continue;
      }
    }
    if (is_self_connected(fd.get())) {
      *error = errno_text(ECONNREFUSED);
      continue;
    }
    set_nodelay(fd.get());
    return fd;
  }
  return Fd();
}

Fd accept_tcp(int listener) {
  for (;;) {
    Fd fd(accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.valid()) {
      set_nodelay(fd.get());
      return fd;
    }
    // ECONNABORTED: a client gave up between SYN and accept; look for the next one.
    if (errno != EINTR && errno != ECONNABORTED) return Fd();
  }
}

bool wait_readable(int fd, Deadline deadline) {
  return poll_one(fd, POLLIN, deadline) != 0;
}

Io send_all(int fd, const void* data, size_t n, Deadline deadline, int* err) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k >= 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // On POLLERR/POLLHUP the next send() reports the precise errno.
      if (poll_one(fd, POLLOUT, deadline) == 0) return Io::kWouldBlock;
      continue;
    }
    *err = errno;
    return errno == EPIPE || errno == ECONNRESET ? Io::kClosed : Io::kError;
  }
  return Io::kOk;
}

Io recv_some(int fd, void* buf, size_t n, size_t* got, int* err) {
  *got = 0;
  for (;;) {
    const ssize_t k = ::recv(fd, buf, n, 0);
    if (k > 0) {
      *got = static_cast<size_t>(k);
      return Io::kOk;
    }
    if (k == 0) return n == 0 ? Io::kOk : Io::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWouldBlock;
    *err = errno;
    return errno == ECONNRESET ? Io::kClosed : Io::kError;
  }
}

}  // namespace commfuse::comm::net
