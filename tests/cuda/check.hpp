// What the CUDA test programs share: a CHECK that counts failures, CUDA calls that must
// succeed, the status a call throws, and the exit protocol (0 passed, 1 failed, 77 skipped
// where no device is usable; COMMFUSE_REQUIRE_GPU=1 turns the skip into a failure). Plain
// programs rather than GoogleTest ones, so scripts/gpu-check.sh builds them on a bare GPU
// machine.
#pragma once

#include <cuda_runtime.h>
#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cuda/runtime_info.hpp"

namespace cudatest {

inline int g_failures = 0;

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      ++::cudatest::g_failures;                                   \
      std::fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                          \
      std::fprintf(stderr, "\n");                                 \
    }                                                             \
  } while (0)

// A CUDA call a test cannot go on without.
inline void ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "FAILED: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// The status a call throws (kSuccess if none) and its message.
template <typename F>
commfuse::Status status_of(F&& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const commfuse::Error& e) {
    if (msg != nullptr) *msg = e.what();
    return e.code();
  }
  return commfuse::Status::kSuccess;
}

// A descriptor made invalid in one way, and what the rejection must name.
template <typename Desc>
struct BadCase {
  const char* name;
  void (*mutate)(Desc&);
  const char* expect;
};

// Each case applied to a copy of `valid`: call(copy) must throw PARAM_INVALID (or
// PARAM_NULLPTR) with a message containing the case's `expect`. Needs no device: the
// arguments are checked before any device work.
template <typename Desc, size_t N, typename Call>
void expect_rejected(const Desc& valid, const BadCase<Desc> (&cases)[N], Call&& call) {
  for (const BadCase<Desc>& b : cases) {
    Desc x = valid;
    b.mutate(x);
    std::string msg;
    const commfuse::Status st = status_of([&] { call(x); }, &msg);
    CHECK(st == commfuse::Status::kParamInvalid || st == commfuse::Status::kParamNullptr,
          "%s: status %d (%s)", b.name, static_cast<int>(st), msg.c_str());
    CHECK(msg.find(b.expect) != std::string::npos, "%s: '%s' does not name '%s'", b.name,
          msg.c_str(), b.expect);
  }
}

// After the checks that need no device: the exit status when no device is usable (the
// device cases skipped), or -1 to go on with them.
inline int exit_without_device() {
  namespace cuda = commfuse::kernels::cuda;
  if (cuda::device_available()) return -1;
  if (g_failures != 0) return 1;
  std::printf("checks that need no device passed; device cases SKIPPED: %s\n",
              cuda::runtime_info().unavailable.c_str());
  const char* require = std::getenv("COMMFUSE_REQUIRE_GPU");
  return require != nullptr && std::string(require) == "1" ? 1 : 77;
}

// The exit status at the end, with a summary line.
inline int finish(const char* what) {
  if (g_failures != 0) {
    std::printf("%s: %d check(s) FAILED\n", what, g_failures);
    return 1;
  }
  std::printf("%s: every case passed on %s\n", what,
              commfuse::kernels::cuda::runtime_info().devices.front().name.c_str());
  return 0;
}

}  // namespace cudatest
