#include "comm/failure.hpp"

namespace commfuse::comm {

bool Failure::set(std::string_view reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_relaxed)) return false;
  reason_ = reason.empty() ? std::string_view("unknown failure") : reason;
  failed_.store(true, std::memory_order_release);
  return true;
}

std::string Failure::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

}  // namespace commfuse::comm
