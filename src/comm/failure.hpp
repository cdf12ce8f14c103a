// The first failure of a transport: recorded once, read from any thread. The calling thread
// checks it at every call (one atomic load); Comm::abort, usable() and failure() may come
// from another thread while a call is in flight (a watchdog, as with ncclCommAbort), and the
// transports' waits end once it is set (docs/reliability.md, Threads).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

namespace commfuse::comm {

class Failure {
 public:
  // Records reason unless a failure is recorded already (the first one stands, so that every
  // later call repeats the cause, not a consequence); true if this one was recorded.
  bool set(std::string_view reason);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The recorded reason; empty while none.
  std::string reason() const;

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::string reason_;  // guarded by mu_; written before failed_ (release)
};

}  // namespace commfuse::comm
