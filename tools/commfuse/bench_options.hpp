// Options of `commfuse bench <collective>`, parsed once by the parent and passed on
// unchanged to every bench-worker rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commfuse::cli {

struct BenchOptions {
  std::string op;  // all-gather | all-reduce | reduce-scatter | all-to-all
  int nprocs = 2;
  uint64_t min_bytes = 4096;      // -b
  uint64_t max_bytes = 64 << 20;  // -e
  double factor = 2;              // -f
  std::string dtype = "float32";
  std::string transport = "shm";  // shm | mpi
  int iters = 0;                  // 0: chosen per size (more for small messages)
  int warmup = 3;
  int rounds = 5;    // alternating commfuse / MPI rounds; the median is reported
  std::string json;  // --json FILE: one JSON object per row
  int port = 0;      // bench-worker only: bootstrap port chosen by the parent
  // quant-all-reduce / quant-reduce-scatter only (-b/-e are then elements):
  std::string scales = "kg";          // kg (fp32 per 128) | mx (e8m0 per 32)
  std::string out_dtype = "float32";  // float32 | float16 | bfloat16
};

// Parses argv after the sub-command name. Throws InvalidArgument with a message naming
// the bad option.
BenchOptions parse_bench_options(const std::vector<std::string>& args);
// The same options as command-line arguments (for the workers).
std::vector<std::string> to_args(const BenchOptions& o);
// "4K", "64M", "1G", "4096" -> bytes.
uint64_t parse_size(const std::string& s);

}  // namespace commfuse::cli
