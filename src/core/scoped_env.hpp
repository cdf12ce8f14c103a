// An environment variable set (or unset) for a scope and restored on the way out, also when
// the scope ends by an exception: for the CLI's benchmarks and demo, which build each plan
// with the algorithm its column names (a plan reads COMMFUSE_ALGO when built), and for the
// tests that change such a parameter (a communicator reads COMMFUSE_TIMEOUT_S). Where ranks
// read it, every rank must set the same, as with the variable itself. Not thread-safe, as
// setenv is not: for a process's set-up and its tests, never inside the library.
#pragma once

#include <cstdlib>
#include <string>

namespace commfuse::detail {

class ScopedEnv {
 public:
  // value nullptr: unset for the scope.
  ScopedEnv(const char* key, const char* value) : key_(key) {
    if (const char* old = std::getenv(key)) {
      old_ = old;
      had_ = true;
    }
    if (value != nullptr)
      setenv(key, value, 1);
    else
      unsetenv(key);
  }
  ScopedEnv(const char* key, const std::string& value) : ScopedEnv(key, value.c_str()) {}
  ~ScopedEnv() {
    if (had_)
      setenv(key_.c_str(), old_.c_str(), 1);
    else
      unsetenv(key_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string key_, old_;
  bool had_ = false;
};

}  // namespace commfuse::detail
