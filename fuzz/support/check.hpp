// Findings: a broken property prints what broke and traps, which libFuzzer reports as a
// crash and saves the input for. Status codes are checked against SPEC §0 here.
#pragma once

#include <commfuse/commfuse.h>

namespace commfuse_fuzz {

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define FUZZ_REQUIRE(cond, ...)                      \
  do {                                               \
    if (!(cond)) ::commfuse_fuzz::fail(__VA_ARGS__); \
  } while (0)

// `fn` returned `status`: it must be one of SPEC §0's codes other than INNER (an internal
// invariant broke), and a failure must leave a message in commfuseGetLastErrorMessage().
void check_status(const char* fn, commfuseStatus_t status);

// check_status, plus: a failure's message names `op` (a C function name or the operator's
// SPEC name, e.g. "all_gather_matmul"; either may be given as `op`/`alias`).
void check_named_failure(const char* fn, commfuseStatus_t status, const char* op,
                         const char* alias);

}  // namespace commfuse_fuzz
