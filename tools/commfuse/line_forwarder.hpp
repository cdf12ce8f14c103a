// Forwarding a rank's output to the launcher's stdout or stderr one whole line at a time, each
// line prefixed with "[rank r] ". The launcher is single-threaded and writes each batch of
// complete lines with one write_all(), so lines of different ranks never mix mid-line.
#pragma once

#include <string>
#include <string_view>

namespace commfuse::cli {

// Writes all of `s` to `fd`, continuing after partial writes and signals. Returns false when
// the reader has gone away (EPIPE; SIGPIPE is ignored while launching) or on another error.
bool write_all(int fd, std::string_view s);

// A launcher message on stderr: "commfuse launch: <message>\n", in one write.
void say(const std::string& message);

class LineForwarder {
 public:
  LineForwarder() = default;
  ~LineForwarder() { close(); }
  LineForwarder(const LineForwarder&) = delete;
  LineForwarder& operator=(const LineForwarder&) = delete;

  // Takes ownership of the pipe's read end `fd` (made non-blocking).
  void open(int fd, int dest_fd, std::string prefix);
  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // One read(); forwards the complete lines. At EOF, flushes the partial line and closes;
  // also closes when the destination's reader has gone away.
  void read_some();
  // Reads what the pipe holds now without waiting for EOF, flushes the partial line and
  // closes: used once the rank has exited, since a descendant may keep the pipe open.
  void drain_and_close();

 private:
  void forward(const char* data, size_t n);
  void flush_partial();
  void close();

  int fd_ = -1;
  int dest_ = -1;
  std::string prefix_;
  std::string pending_;  // the start of a line whose '\n' has not arrived yet
};

}  // namespace commfuse::cli
