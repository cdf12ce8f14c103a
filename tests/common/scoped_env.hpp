// An environment variable set (or unset) for a scope and restored on the way out: for the
// tests that change a parameter commfuse reads when it builds something (a plan reads
// COMMFUSE_ALGO, a communicator COMMFUSE_TIMEOUT_S). Where ranks read it, every rank must
// set the same, as with the variable itself.
#pragma once

#include <cstdlib>
#include <string>

namespace commfuse::test {

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

}  // namespace commfuse::test
