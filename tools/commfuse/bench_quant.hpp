// `commfuse bench quant-all-reduce|quant-reduce-scatter` (bench_quant.cpp), called by the
// bench worker once MPI is up; it makes its own communicator.
#pragma once

#include "bench_options.hpp"

namespace commfuse::cli {

// Prints one row per size on rank 0 (and JSON lines to --json); returns non-zero if any
// checked result was outside its bound.
int run_quant_bench(int rank, int world_size, const BenchOptions& o);

}  // namespace commfuse::cli
