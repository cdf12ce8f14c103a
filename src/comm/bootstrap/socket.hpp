// Thin POSIX TCP layer for the bootstrap: owned descriptors, deadlines, and non-blocking
// connect/accept/send/recv that never wait past a deadline. Knows nothing of the protocol.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace commfuse::comm::net {

// Owns one file descriptor; closing happens exactly once, in the destructor or reset().
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// A point in time after which a wait gives up. Every blocking step takes one.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(Clock::time_point at) : at_(at) {}
  static Deadline after(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, rounded up so a poll() never returns just before the deadline
  // and spins; 0 once expired.
  int remaining_ms() const;
  Deadline earlier(Deadline o) const { return o.at_ < at_ ? o : *this; }

 private:
  Clock::time_point at_;
};

// "host:port", with brackets around an IPv6 literal ("[::1]:29500").
std::string host_port(const std::string& host, int port);

// strerror as a std::string (thread-safe variant).
std::string errno_text(int err);

// Binds and listens on host:port (SO_REUSEADDR, non-blocking, close-on-exec). Tries every
// address the host resolves to. On failure returns an invalid Fd and sets *error to the
// reason ("Address already in use").
Fd listen_tcp(const std::string& host, int port, std::string* error);

// One attempt to connect to every address of host:port in turn, each bounded by the
// deadline. Returns a connected, non-blocking socket with TCP_NODELAY, or an invalid Fd
// with *error set ("Connection refused").
Fd connect_tcp(const std::string& host, int port, Deadline deadline, std::string* error);

// Accepts one pending connection if there is one (listener is non-blocking); the result is
// non-blocking with TCP_NODELAY. Invalid Fd when none is pending.
Fd accept_tcp(int listener);

// Waits until fd is readable (or has hung up). False on deadline.
bool wait_readable(int fd, Deadline deadline);

// What this thread's socket waits are for, while one lives: an interrupt (Ctrl-C) that ends
// such a wait says "<who>: interrupted (<why>) while <activity>" (SPEC §0: the rank and what
// it waited for) instead of "... while waiting on a socket". Nested: the innermost counts.
class WaitContext {
 public:
  WaitContext(std::string who, std::string activity);
  ~WaitContext();
  WaitContext(const WaitContext&) = delete;
  WaitContext& operator=(const WaitContext&) = delete;

  const std::string& who() const { return who_; }
  const std::string& activity() const { return activity_; }
  static const WaitContext* current();

 private:
  std::string who_, activity_;
  const WaitContext* outer_;
};

enum class Io { kOk, kWouldBlock, kClosed, kError };

// Sends all n bytes, waiting for buffer space until the deadline (kWouldBlock = timed out).
// kClosed/kError when the peer is gone; *err gets errno for kError. Never raises SIGPIPE.
Io send_all(int fd, const void* data, size_t n, Deadline deadline, int* err);

// Reads what is available right now, up to n bytes; *got = bytes read. kClosed on EOF.
Io recv_some(int fd, void* buf, size_t n, size_t* got, int* err);

}  // namespace commfuse::comm::net
