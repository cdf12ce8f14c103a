#include "core/error.hpp"

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

}  // namespace detail
}  // namespace commfuse
