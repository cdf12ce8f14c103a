// Plans with a chosen algorithm, for the benchmarks and the demo: each column (or row) runs
// the algorithm it is labelled with, whatever the caller's COMMFUSE_ALGO says.
#pragma once

#include <cstdlib>
#include <string>

namespace commfuse::cli {

// Builds a plan with COMMFUSE_ALGO=<op>:<algo> (plans read it when built) and restores the
// caller's setting.
template <typename Make>
auto with_algorithm(const std::string& op_algo, Make&& make) {
  const char* old = std::getenv("COMMFUSE_ALGO");
  const std::string saved = old != nullptr ? old : "";
  setenv("COMMFUSE_ALGO", op_algo.c_str(), 1);
  auto plan = make();
  if (old != nullptr)
    setenv("COMMFUSE_ALGO", saved.c_str(), 1);
  else
    unsetenv("COMMFUSE_ALGO");
  return plan;
}

}  // namespace commfuse::cli
