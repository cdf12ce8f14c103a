// Building error messages and throwing the exception type that matches a SPEC §0 status.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace commfuse::detail {

// Concatenate anything streamable: cat("x2 dim 0 is ", k2, " but x1 dim 1 is ", k1).
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

[[noreturn]] void throw_status(Status code, const std::string& message);

// Copies message into the fixed field dst[cap] (a wire descriptor's reason), NUL-terminated
// and cut, where it does not fit, at a UTF-8 character boundary, so that what the peers
// read (and Python decodes) stays valid UTF-8.
void copy_message(char* dst, size_t cap, std::string_view message);

// "rank 3" / "ranks 1, 2, 5-9, ..." for a message naming ranks (ascending): runs of three or
// more as ranges, at most 16 runs, then the count. A world of 10^8 that never formed listed
// every missing rank: a message of a gigabyte, built for 13 s past the timeout. "ranks ?"
// for none (a wait whose ranks are unknown).
std::string rank_list(const std::vector<int>& ranks);

}  // namespace commfuse::detail

// Argument checks: the message names the function and argument; both values are printed
// by the caller's message (Gloo's ENFORCE habit, not NCCL's "unhandled error").
#define CF_CHECK_ARG(cond, ...)                                               \
  do {                                                                        \
    if (!(cond))                                                              \
      ::commfuse::detail::throw_status(::commfuse::Status::kParamInvalid,     \
                                       ::commfuse::detail::cat(__VA_ARGS__)); \
  } while (0)

#define CF_CHECK_NOTNULL(ptr, ...)                                            \
  do {                                                                        \
    if ((ptr) == nullptr)                                                     \
      ::commfuse::detail::throw_status(::commfuse::Status::kParamNullptr,     \
                                       ::commfuse::detail::cat(__VA_ARGS__)); \
  } while (0)

// An internal invariant: failing it is a commfuse bug, reported with file:line.
#define CF_ASSERT(cond)                                                                    \
  do {                                                                                     \
    if (!(cond))                                                                           \
      ::commfuse::detail::throw_status(                                                    \
          ::commfuse::Status::kInner,                                                      \
          ::commfuse::detail::cat("internal error: ", #cond, " failed at ", __FILE__, ":", \
                                  __LINE__));                                              \
  } while (0)
