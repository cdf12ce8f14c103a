// Strict parsing of the `commfuse` commands' option values, shared by every command so that
// "-n 2x", "--iters abc" and "-b 4Q" are refused the same way everywhere instead of being
// read as 2, 0 and 4 (what atoi and strtod would do).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace commfuse::cli {

// A mistake on the command line: main prints it with a pointer to --help and exits 2.
class UsageError : public std::runtime_error {
 public:
  // help_command: what to run for the usage, e.g. "commfuse bench all-reduce --help";
  // empty means "commfuse <command> --help".
  explicit UsageError(const std::string& message, std::string help_command = {})
      : std::runtime_error(message), help_command_(std::move(help_command)) {}
  const std::string& help_command() const { return help_command_; }

 private:
  std::string help_command_;
};

// The whole of `value` as an integer in [min, max]; otherwise a UsageError naming `option`
// and the value, e.g. "--iters: 'abc' is not a non-negative integer".
int64_t parse_integer(std::string_view option, std::string_view value, int64_t min,
                      int64_t max = std::numeric_limits<int64_t>::max());
inline int parse_int(std::string_view option, std::string_view value, int min,
                     int max = std::numeric_limits<int>::max()) {
  return static_cast<int>(parse_integer(option, value, min, max));
}

// The whole of `value` as a finite decimal number, at least `min` (or above it when
// `min_exclusive`).
double parse_real(std::string_view option, std::string_view value, double min,
                  bool min_exclusive = false);

// A count with an optional binary suffix: "4096", "4K", "1.5M", "64MiB", "1G", "8B"; the
// result must be a whole number, at least 1 and at most 2^53.
uint64_t parse_size(std::string_view option, std::string_view value);

// For the commands that take no options (info, selfcheck, demo, version): -h/--help prints
// `usage` to stdout and gives 0; anything else is a UsageError; no arguments give nullopt,
// meaning "run the command".
std::optional<int> no_options(int argc, char** argv, const char* usage);

}  // namespace commfuse::cli
