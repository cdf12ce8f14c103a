// Logging to stderr, level from COMMFUSE_LOG, each line prefixed host:pid:rank so the
// interleaved output of many ranks can be told apart.
#pragma once

#include <string>

#include "core/error.hpp"

namespace commfuse::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Level parsed from COMMFUSE_LOG (an invalid value logs a warning once and keeps "warn").
Level level();
bool enabled(Level l);
// The rank shown in the prefix: set by a communicator; before that RANK from the
// environment, else "-".
void set_rank(int rank);
std::string prefix();
void write(Level l, const std::string& message);

// COMMFUSE_VERBOSE, read once (an invalid value logs a warning and means 0).
int verbose_level();
// One decision line (a plan and why), printed when COMMFUSE_VERBOSE >= 1 whatever the log
// level, prefixed "commfuse verbose:" like ONEDNN_VERBOSE's lines.
void verbose(const std::string& message);

}  // namespace commfuse::log

#define CF_LOG(lvl, ...)                                                                         \
  do {                                                                                           \
    if (::commfuse::log::enabled(::commfuse::log::Level::lvl))                                   \
      ::commfuse::log::write(::commfuse::log::Level::lvl, ::commfuse::detail::cat(__VA_ARGS__)); \
  } while (0)
