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

}  // namespace detail
}  // namespace commfuse
