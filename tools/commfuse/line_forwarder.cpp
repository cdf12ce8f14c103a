#include "line_forwarder.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace commfuse::cli {
namespace {

// A rank printing a progress bar with '\r' and no '\n' must not grow the buffer without
// bound: past this size the partial line is forwarded as if it had ended.
constexpr size_t kMaxPending = size_t{1} << 20;
constexpr size_t kReadSize = size_t{1} << 16;
// drain_and_close() reads at most this many times: a descendant still writing to the pipe
// after the rank exited must not keep the launcher busy forever.
constexpr int kMaxDrainReads = 64;

}  // namespace

bool write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n > 0) {
      s.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {
      // Our stdout may be a non-blocking descriptor shared with a parent: wait, don't drop.
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else if (!(n < 0 && errno == EINTR)) {
      return false;
    }
  }
  return true;
}

void say(const std::string& message) {
  write_all(STDERR_FILENO, "commfuse launch: " + message + "\n");
}

void LineForwarder::open(int fd, int dest_fd, std::string prefix) {
  close();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  fd_ = fd;
  dest_ = dest_fd;
  prefix_ = std::move(prefix);
  pending_.clear();
}

void LineForwarder::read_some() {
  if (fd_ < 0) return;
  char buf[kReadSize];
  const ssize_t n = ::read(fd_, buf, sizeof buf);
  if (n > 0) {
    forward(buf, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    flush_partial();
    close();
  }
}

void LineForwarder::drain_and_close() {
  for (int i = 0; i < kMaxDrainReads && fd_ >= 0; ++i) {
    char buf[kReadSize];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n > 0) {
      forward(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EOF, nothing more right now (EAGAIN), or an error
    }
  }
  flush_partial();
  close();
}

void LineForwarder::forward(const char* data, size_t n) {
  pending_.append(data, n);
  const size_t last = pending_.rfind('\n');
  if (last == std::string::npos) {
    if (pending_.size() >= kMaxPending) flush_partial();
    return;
  }
  std::string out;
  out.reserve(last + 1 + prefix_.size() * 4);
  for (size_t start = 0; start <= last;) {
    const size_t nl = pending_.find('\n', start);
    out += prefix_;
    out.append(pending_, start, nl - start + 1);
    start = nl + 1;
  }
  pending_.erase(0, last + 1);
  // Our reader went away (`commfuse launch ... | head`): close the rank's pipe too, so the
  // rank sees EPIPE/SIGPIPE on its next write exactly as if it wrote to that reader itself,
  // instead of running on with its output discarded.
  if (!write_all(dest_, out)) {
    pending_.clear();
    close();
  }
}

// A final line without '\n' still gets its prefix, and a '\n' so that whatever is written
// next starts on a line of its own.
void LineForwarder::flush_partial() {
  if (pending_.empty()) return;
  write_all(dest_, prefix_ + pending_ + "\n");
  pending_.clear();
}

void LineForwarder::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace commfuse::cli
