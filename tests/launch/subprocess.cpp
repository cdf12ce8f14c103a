#include "subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace commfuse::test {

Subprocess::Subprocess(const std::vector<std::string>& argv) : start_(Clock::now()) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    std::perror("pipe2");
    std::abort();
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    reap(0);
  }
  for (int fd : {out_fd_, err_fd_})
    if (fd >= 0) ::close(fd);
}

void Subprocess::pump(int timeout_ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (::poll(fds, 2, timeout_ms) <= 0) return;
  int* fd[2] = {&out_fd_, &err_fd_};
  std::string* text[2] = {&result_.out, &result_.err};
  for (int i = 0; i < 2; ++i) {
    if (fds[i].revents == 0) continue;
    char buf[65536];
    const ssize_t n = ::read(*fd[i], buf, sizeof buf);
    if (n > 0) {
      text[i]->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(*fd[i]);
      *fd[i] = -1;  // poll ignores negative descriptors
    }
  }
}

bool Subprocess::reap(int options) {
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(pid_, &status, options)) < 0 && errno == EINTR) {
  }
  if (got != pid_) return false;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  pid_ = -1;
  return true;
}

const std::string& Subprocess::wait_for_stdout_lines(size_t lines, double timeout_s) {
  const auto deadline = start_ + std::chrono::duration<double>(timeout_s);
  auto count = [&] {
    size_t n = 0;
    for (char c : result_.out) n += c == '\n';
    return n;
  };
  while (count() < lines && out_fd_ >= 0 && Clock::now() < deadline) pump(100);
  return result_.out;
}

RunResult Subprocess::finish(double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while ((out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < deadline) pump(100);
  while (pid_ > 0 && !reap(WNOHANG) && Clock::now() < deadline) ::usleep(10000);
  if (pid_ > 0) {
    result_.timed_out = true;
    ::kill(pid_, SIGKILL);
    reap(0);
  }
  return result_;
}

}  // namespace commfuse::test
