// `commfuse` — the command-line front door: info, demo, selfcheck, bench, launch, version.
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "cli_args.hpp"
#include "commands.hpp"

namespace {

void usage(FILE* out) {
  std::fprintf(
      out,
      "usage: commfuse <command> [args]\n"
      "       commfuse <command> --help   (that command's usage)\n"
      "\n"
      "commands:\n"
      "  info        version, build, backends, CPU features, oneDNN/MPI, parameters\n"
      "  demo        the main job: operators across local ranks, verified, timed\n"
      "              (number formats, then the operators on 8 ranks vs float64)\n"
      "  selfcheck   number formats: SPEC check values, bulk vs reference, throughput\n"
      "  bench       bench <benchmark> [options]: collectives, fused matmul and quantized\n"
      "              operators timed against OpenMPI and the unfused composition in the\n"
      "              same run ('commfuse bench --help' lists them all)\n"
      "  launch      launch -n W [--] program [args...]: run W local ranks of a program\n"
      "  version     print the version (also --version)\n");
}

constexpr const char* kVersionUsage =
    "usage: commfuse version\n"
    "       commfuse --version\n"
    "\n"
    "Prints \"commfuse <version>\".\n";

int cmd_version(int argc, char** argv) {
  if (const auto rc = commfuse::cli::no_options(argc, argv, kVersionUsage)) return *rc;
  std::printf("commfuse %s\n", commfuse::version());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  try {
    if (cmd == "info") return commfuse::cli::cmd_info(argc - 1, argv + 1);
    if (cmd == "demo") return commfuse::cli::cmd_demo(argc - 1, argv + 1);
    if (cmd == "demo-worker") return commfuse::cli::cmd_demo_worker(argc - 1, argv + 1);
    if (cmd == "selfcheck") return commfuse::cli::cmd_selfcheck(argc - 1, argv + 1);
    if (cmd == "launch") return commfuse::cli::cmd_launch(argc - 1, argv + 1);
    if (cmd == "bench") return commfuse::cli::cmd_bench(argc - 1, argv + 1);
    if (cmd == "bench-worker") return commfuse::cli::cmd_bench_worker(argc - 1, argv + 1);
    if (cmd == "version" || cmd == "--version") return cmd_version(argc - 1, argv + 1);
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      usage(stdout);
      return 0;
    }
  } catch (const commfuse::cli::UsageError& e) {
    const std::string help =
        e.help_command().empty() ? "commfuse " + std::string(cmd) + " --help" : e.help_command();
    std::fprintf(stderr, "commfuse %s: %s\n(run '%s' for usage)\n", argv[1], e.what(),
                 help.c_str());
    return 2;
  } catch (const commfuse::Error& e) {
    std::fprintf(stderr, "commfuse %s: error %d (%s): %s\n", argv[1], static_cast<int>(e.code()),
                 commfuse::status_name(e.code()), e.what());
    return 1;
  } catch (const std::bad_alloc&) {  // a message, not std::terminate's SIGABRT
    std::fprintf(stderr, "commfuse %s: out of memory\n", argv[1]);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commfuse %s: internal error: %s\n", argv[1], e.what());
    return 1;
  }
  std::fprintf(stderr, "commfuse: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
