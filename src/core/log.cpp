#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/cpu_features.hpp"
#include "core/params.hpp"

namespace commfuse::log {
namespace {

std::atomic<int> g_rank{-1};

// Distinct verbose lines remembered at level 1; past this many, new lines print every time.
constexpr size_t kVerboseLinesRemembered = 4096;

Level parse_level() {
  try {
    const std::string v = params::get_string("COMMFUSE_LOG");
    if (v == "error") return Level::kError;
    if (v == "info") return Level::kInfo;
    if (v == "debug") return Level::kDebug;
    return Level::kWarn;
  } catch (const Error& e) {
    std::fprintf(stderr, "commfuse: warning: %s; using warn\n", e.what());
    return Level::kWarn;
  }
}

const char* level_name(Level l) {
  switch (l) {
    case Level::kError:
      return "ERROR";
    case Level::kWarn:
      return "WARN";
    case Level::kInfo:
      return "INFO";
    case Level::kDebug:
      return "DEBUG";
  }
  return "?";
}

}  // namespace

Level level() {
  static const Level cached = parse_level();  // read once: the environment is fixed at start
  return cached;
}

bool enabled(Level l) {
  return static_cast<int>(l) <= static_cast<int>(level());
}

void set_rank(int rank) {
  g_rank.store(rank, std::memory_order_relaxed);
}

std::string prefix() {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  int rank = g_rank.load(std::memory_order_relaxed);
  std::string rank_str = rank >= 0 ? std::to_string(rank) : "-";
  if (rank < 0) {
    if (const char* env_rank = std::getenv("RANK")) rank_str = env_rank;
  }
  return detail::cat(host, ":", getpid(), ":", rank_str);
}

void write(Level l, const std::string& message) {
  static std::mutex mu;  // one line at a time from the threads of this process
  const std::string line = detail::cat(prefix(), " commfuse ", level_name(l), " ", message, "\n");
  std::lock_guard<std::mutex> lock(mu);
  std::fputs(line.c_str(), stderr);
}

int verbose_level() {
  static const int level = [] {
    try {
      return static_cast<int>(params::get_int("COMMFUSE_VERBOSE"));
    } catch (const Error& e) {
      write(Level::kWarn, detail::cat(e.what(), "; verbose output off"));
      return 0;
    }
  }();
  return level;
}

void verbose(const std::string& message) {
  if (verbose_level() < 1) return;
  // Every decision depends on the CPU: say once which ISA the kernels were chosen for.
  static std::once_flag cpu_line;
  std::call_once(cpu_line, [] {
    const cpu::IsaLevel cap = cpu::max_isa();
    write(Level::kInfo,
          detail::cat("verbose: cpu: ", cpu::model_name(), ", ISA ",
                      cpu::isa_level_name(cpu::highest_level(cpu::features())), " (detected ",
                      cpu::isa_level_name(cpu::highest_level(cpu::detected_features())),
                      cap == cpu::IsaLevel::kAll ? std::string()
                                                 : detail::cat(", capped by COMMFUSE_MAX_CPU_ISA=",
                                                               cpu::isa_level_name(cap)),
                      "), array loops ", cpu::array_loops_name()));
  });
  // Level 1: each distinct line once per process. The collectives decide on every call, and
  // a line per call flooded stderr: an all_to_all benchmark ran 2-3x slower with
  // COMMFUSE_VERBOSE=1 than without, writing the same few lines thousands of times. Level 2
  // prints every decision as it is made.
  if (verbose_level() == 1) {
    struct Seen {
      std::mutex mu;
      std::unordered_set<std::string> lines;
    };
    static auto* const seen = new Seen;  // never destroyed: a plan may be made during exit
    std::lock_guard<std::mutex> lock(seen->mu);
    if (seen->lines.count(message) != 0) return;
    if (seen->lines.size() < kVerboseLinesRemembered) seen->lines.insert(message);
  }
  write(Level::kInfo, "verbose: " + message);
}

}  // namespace commfuse::log
