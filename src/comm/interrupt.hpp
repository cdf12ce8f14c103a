// The host program's interrupt check (commfuse::set_interrupt_check), polled by the
// transports' long waits on the waiting thread: a Python rank blocked in a call for a peer
// that never comes would otherwise ignore Ctrl-C until COMMFUSE_TIMEOUT_S (300 s by
// default), because Python runs its signal handlers only between bytecodes, on the thread
// the call holds.
#pragma once

#include <chrono>
#include <string>

namespace commfuse::comm {

// How long a wait blocked in the kernel (poll, sleep) may go before it polls the check.
inline constexpr int kInterruptSliceMs = 100;

// One wait's polling of the check: once the wait has lasted 100 ms, then every 100 ms.
class InterruptPoll {
 public:
  using Clock = std::chrono::steady_clock;

  // Why the host asks this wait to end (the check's answer, copied), or empty. Without a
  // check installed: one relaxed load, no clock reading.
  std::string poll(Clock::time_point now);
  std::string poll();

 private:
  Clock::time_point next_{};
};

// "interrupted (<why>) while <doing>": the message a wait fails with.
std::string interrupted_message(const std::string& why, const std::string& doing);

}  // namespace commfuse::comm
