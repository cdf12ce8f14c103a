// Builds without MPI: the benchmarks compare against OpenMPI in the same run, so they are
// not supported there and say so.
#include <cstdio>

#include "commands.hpp"

namespace commfuse::cli {

int cmd_bench(int, char**) {
  std::fprintf(stderr,
               "commfuse bench: not supported: this build has no MPI (install "
               "libopenmpi-dev and rebuild)\n");
  return 2;
}
int cmd_bench_worker(int argc, char** argv) {
  return cmd_bench(argc, argv);
}

}  // namespace commfuse::cli
