#include "core/error.hpp"

#include <algorithm>
#include <cstring>

namespace commfuse {

const char* status_name(Status status) noexcept {
  switch (status) {
    case Status::kSuccess:
      return "SUCCESS";
    case Status::kParamNullptr:
      return "PARAM_NULLPTR";
    case Status::kParamInvalid:
      return "PARAM_INVALID";
    case Status::kRuntimeError:
      return "RUNTIME_ERROR";
    case Status::kInner:
      return "INNER";
  }
  return "UNKNOWN_STATUS";
}

namespace detail {

void throw_status(Status code, const std::string& message) {
  switch (code) {
    case Status::kParamNullptr:
      throw NullPointerError(message);
    case Status::kParamInvalid:
      throw InvalidArgument(message);
    case Status::kRuntimeError:
      throw RuntimeFailure(message);
    case Status::kInner:
      throw InternalError(message);
    case Status::kSuccess:
      break;
  }
  throw InternalError("throw_status called with SUCCESS: " + message);
}

void copy_message(char* dst, size_t cap, std::string_view message) {
  if (cap == 0) return;
  size_t n = std::min(message.size(), cap - 1);
  // Back off over continuation bytes (10xxxxxx) to the start of the character that was cut.
  if (n < message.size())
    while (n > 0 && (static_cast<unsigned char>(message[n]) & 0xC0) == 0x80) --n;
  std::memcpy(dst, message.data(), n);
  dst[n] = '\0';
}

std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kMaxRuns = 16;
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  if (ranks.empty()) return s + "?";
  size_t runs = 0;
  for (size_t i = 0; i < ranks.size(); ++runs) {
    if (runs == kMaxRuns) return s + cat(", ... (", ranks.size(), " in all)");
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (runs ? ", " : "") + std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace detail
}  // namespace commfuse
