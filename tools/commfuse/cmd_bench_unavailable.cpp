// Builds without MPI: the benchmarks compare against OpenMPI in the same run, so they are
// not supported there and say so; --help still lists them and bad options are still
// reported as such.
#include <cstdio>
#include <string>
#include <vector>

#include "bench_catalog.hpp"
#include "bench_options.hpp"
#include "commands.hpp"

namespace commfuse::cli {

int cmd_bench(int argc, char** argv) {
  constexpr const char* kUnsupported =
      "commfuse bench: not supported: this build has no MPI (install libopenmpi-dev and "
      "rebuild)\n";
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (const auto rc = bench_help(args)) {
    std::fputs(kUnsupported, *rc == 0 ? stdout : stderr);
    return *rc;
  }
  parse_bench_options(args);  // usage errors first, as in a build with MPI
  std::fputs(kUnsupported, stderr);
  return 2;
}
int cmd_bench_worker(int argc, char** argv) {
  return cmd_bench(argc, argv);
}

}  // namespace commfuse::cli
