// A benchmark's --json rows (rank 0), the file opened when the first row is written: a run
// that fails before it measured anything leaves an existing file as it was (opened at the
// start, it had been emptied by a run that then failed), and one that fails later keeps the
// rows written so far (each is flushed). Closed by the destructor.
#pragma once

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace commfuse::cli {

class JsonRows {
 public:
  explicit JsonRows(std::string path) : path_(std::move(path)) {}  // "": no file
  ~JsonRows() {
    if (file_ != nullptr) std::fclose(file_);
  }
  JsonRows(const JsonRows&) = delete;
  JsonRows& operator=(const JsonRows&) = delete;

  bool enabled() const { return !path_.empty(); }
  // One row, printf-style.
  __attribute__((format(printf, 2, 3))) void row(const char* format, ...) {
    if (file_ == nullptr) {
      file_ = std::fopen(path_.c_str(), "w");
      CF_CHECK_ARG(file_ != nullptr, "bench: cannot write --json file ", path_);
    }
    va_list args;
    va_start(args, format);
    const int wrote = std::vfprintf(file_, format, args);
    va_end(args);
    // Flushed, so that the rows measured so far survive a run that fails later; a row that
    // cannot be written (a full disk, /dev/full) fails the run instead of vanishing.
    if (wrote < 0 || std::fflush(file_) != 0)
      detail::throw_status(Status::kRuntimeError, detail::cat("bench: writing --json file ", path_,
                                                              " failed: ", std::strerror(errno)));
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

}  // namespace commfuse::cli
