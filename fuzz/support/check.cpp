#include "support/check.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace commfuse_fuzz {

void fail(const char* fmt, ...) {
  std::fprintf(stderr, "\n==== commfuse fuzz finding: ");
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  __builtin_trap();
}

void check_status(const char* fn, commfuseStatus_t status) {
  const char* msg = commfuseGetLastErrorMessage();
  switch (status) {
    case COMMFUSE_SUCCESS:
      return;
    case COMMFUSE_PARAM_NULLPTR:
    case COMMFUSE_PARAM_INVALID:
    case COMMFUSE_RUNTIME_ERROR:
      FUZZ_REQUIRE(msg != nullptr && msg[0] != '\0', "%s returned %d with no error message", fn,
                   static_cast<int>(status));
      return;
    case COMMFUSE_INNER:
      fail("%s returned INNER (an internal invariant broke): %s", fn, msg ? msg : "(null)");
    default:
      fail("%s returned %d, not a SPEC status code: %s", fn, static_cast<int>(status),
           msg ? msg : "(null)");
  }
}

void check_named_failure(const char* fn, commfuseStatus_t status, const char* op,
                         const char* alias) {
  check_status(fn, status);
  if (status == COMMFUSE_SUCCESS) return;
  const char* msg = commfuseGetLastErrorMessage();
  FUZZ_REQUIRE(std::strstr(msg, op) != nullptr || (alias && std::strstr(msg, alias) != nullptr),
               "%s failed (%d) with a message that names neither %s nor %s: %s", fn,
               static_cast<int>(status), op, alias ? alias : "-", msg);
}

}  // namespace commfuse_fuzz
