#include "comm/interrupt.hpp"

#include <commfuse/commfuse.hpp>

#include <atomic>

#include "core/error.hpp"

namespace commfuse {
namespace {
std::atomic<InterruptCheck> g_check{nullptr};
constexpr auto kPeriod = std::chrono::milliseconds(comm::kInterruptSliceMs);
}  // namespace

void set_interrupt_check(InterruptCheck check) {
  g_check.store(check, std::memory_order_release);
}

namespace comm {

std::string InterruptPoll::poll(Clock::time_point now) {
  const InterruptCheck check = g_check.load(std::memory_order_acquire);
  if (check == nullptr) return {};
  // Not at once: a wait that ends within 100 ms (nearly all) costs the host nothing, which
  // for Python can be a wait for the GIL while another thread holds it.
  if (next_ == Clock::time_point{}) next_ = now + kPeriod;
  if (now < next_) return {};
  // The check may take a while (Python's waits for the GIL): count the period from its end.
  const char* why = check();
  next_ = Clock::now() + kPeriod;
  if (why == nullptr) return {};
  return why[0] != '\0' ? std::string(why) : std::string("interrupt");
}

std::string InterruptPoll::poll() {
  if (g_check.load(std::memory_order_relaxed) == nullptr) return {};
  return poll(Clock::now());
}

std::string interrupted_message(const std::string& why, const std::string& doing) {
  return detail::cat("interrupted (", why, ") while ", doing);
}

}  // namespace comm
}  // namespace commfuse
