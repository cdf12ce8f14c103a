// Running a command with its stdout and stderr captured, for the launcher tests: fork/exec
// (no shell), both pipes read with poll so that neither can fill up and stall the child.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace commfuse::test {

struct RunResult {
  int exit_code = -1;  // 128 + signal number if it was killed
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;
};

class Subprocess {
 public:
  explicit Subprocess(const std::vector<std::string>& argv);
  ~Subprocess();  // SIGKILLs and reaps a child that was not finished
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads until stdout holds `lines` complete lines, EOF, or timeout; returns stdout so far.
  const std::string& wait_for_stdout_lines(size_t lines, double timeout_s);
  // Reads both pipes to EOF and reaps the child; SIGKILLs it after timeout_s.
  RunResult finish(double timeout_s = 60);

 private:
  using Clock = std::chrono::steady_clock;
  void pump(int timeout_ms);  // one poll round over the open pipes
  bool reap(int options);     // waitpid; true once the child's status is in result_

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  Clock::time_point start_;
  RunResult result_;
};

inline RunResult run(const std::vector<std::string>& argv, double timeout_s = 60) {
  return Subprocess(argv).finish(timeout_s);
}

}  // namespace commfuse::test
