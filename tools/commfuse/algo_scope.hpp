// Plans with a chosen algorithm, for the benchmarks and the demo: each column (or row) runs
// the algorithm it is labelled with, whatever the caller's COMMFUSE_ALGO says.
#pragma once

#include <string>

#include "core/scoped_env.hpp"

namespace commfuse::cli {

// Builds a plan with COMMFUSE_ALGO=<op>:<algo> (plans read it when built) and restores the
// caller's setting, also when the build throws (a plan the next column builds must not run
// this one's algorithm).
template <typename Make>
auto with_algorithm(const std::string& op_algo, Make&& make) {
  const detail::ScopedEnv algo("COMMFUSE_ALGO", op_algo);
  return make();
}

}  // namespace commfuse::cli
