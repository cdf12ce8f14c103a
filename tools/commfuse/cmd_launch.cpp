// `commfuse launch -n W [options] [--] program [args...]`: argument parsing; the launcher
// itself is in launcher.cpp so that other commands (bench) can start ranks the same way.
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_args.hpp"
#include "commands.hpp"
#include "launcher.hpp"

namespace commfuse::cli {
namespace {

// Processes on one host: past this a typo (-n 2147483647) would fork until the system
// refuses, or fail allocating the launcher's table, instead of a usage error.
constexpr int kMaxLaunchRanks = 65536;
constexpr const char* kUsage = "usage: commfuse launch -n W [options] [--] program [args...]\n";

constexpr const char* kHelp =
    "\n"
    "Starts W ranks of program on this host, with RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT set (init_method env://).\n"
    "Each output line is prefixed with \"[rank r] \"; when a rank fails, the others get the\n"
    "grace period to exit by themselves, then SIGTERM, then SIGKILL after the grace period\n"
    "again. SIGINT/SIGTERM are forwarded to the ranks (SIGKILL follows after the grace).\n"
    "A launch stopped so (or by a failure) also kills what the ranks started and left behind.\n"
    "A line longer than 1 MiB is forwarded in 1 MiB pieces, each prefixed (--no-prefix\n"
    "passes the output through whole).\n"
    "\n"
    "options:\n"
    "  -n, --nprocs W   number of ranks (required, 1 to 65536)\n"
    "  --grace S        after a rank fails, seconds the others get to exit by themselves\n"
    "                   before SIGTERM, and again before SIGKILL (default 5, at most 1e7)\n"
    "  --port P         MASTER_PORT (default: a free port on 127.0.0.1)\n"
    "  --no-prefix      pass the ranks' output through unchanged\n"
    "  -h, --help       this text\n"
    "\n"
    "Options end at the first argument that is not one (or at --), so\n"
    "`commfuse launch -n 2 python -u train.py` passes -u to python.\n"
    "\n"
    "exit code: 0 if every rank exits 0; otherwise the first failing rank's exit code\n"
    "(128 + signal number if it was killed, 127 if it cannot be executed); 128 + signal\n"
    "number if the launcher was interrupted; 2 for usage errors.\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "commfuse launch: %s\n%s(run 'commfuse launch --help' for details)\n",
               message.c_str(), kUsage);
  return 2;
}

// Matches `arg` against an option that takes a value, in the forms "-n 3", "-n3" (short
// only), "--nprocs 3" and "--nprocs=3". Returns the value, advancing i past what it used.
std::optional<std::string_view> option_value(int argc, char** argv, int& i, std::string_view name,
                                             bool* missing) {
  const std::string_view arg = argv[i];
  if (arg.substr(0, name.size()) != name) return std::nullopt;
  const std::string_view rest = arg.substr(name.size());
  const bool is_short = name.size() == 2;
  if (rest.empty()) {
    if (i + 1 >= argc) {
      *missing = true;
      return std::nullopt;
    }
    return std::string_view(argv[++i]);
  }
  if (!is_short && rest[0] != '=') return std::nullopt;  // --portx is not --port
  return is_short ? rest : rest.substr(1);
}

}  // namespace

int cmd_launch(int argc, char** argv) {
  LaunchOptions opts;
  bool have_n = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    if (arg == "-h" || arg == "--help") {
      std::printf("%s%s", kUsage, kHelp);
      return 0;
    }
    if (arg == "--no-prefix") {
      opts.prefix = false;
      continue;
    }
    bool missing = false;
    std::optional<std::string_view> v;
    try {  // the values: strictly numbers in range (cli_args.hpp), or a usage error
      if ((v = option_value(argc, argv, i, "--nprocs", &missing))) {
        opts.nprocs = parse_int("--nprocs", *v, 1, kMaxLaunchRanks);
        have_n = true;
      } else if ((v = option_value(argc, argv, i, "-n", &missing))) {
        opts.nprocs = parse_int("-n", *v, 1, kMaxLaunchRanks);
        have_n = true;
      } else if ((v = option_value(argc, argv, i, "--grace", &missing))) {
        opts.grace_s = parse_real("--grace", *v, 0);
        if (opts.grace_s > 1e7)
          return usage_error("--grace: '" + std::string(*v) + "' must be at most 1e7 (seconds)");
      } else if ((v = option_value(argc, argv, i, "--port", &missing))) {
        opts.port = parse_int("--port", *v, 1, 65535);
      } else if (missing) {
        return usage_error("option " + std::string(arg) + " needs a value");
      } else {
        return usage_error("unknown option '" + std::string(arg) + "'");
      }
    } catch (const UsageError& e) {
      return usage_error(e.what());
    }
  }
  if (!have_n) return usage_error("the number of ranks is required: -n W");
  if (i >= argc) return usage_error("no program given");
  const std::vector<std::string> program(argv + i, argv + argc);
  return launch(opts, program);
}

}  // namespace commfuse::cli
