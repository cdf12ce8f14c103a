// Options of `commfuse bench <collective>`, parsed once by the parent and passed on
// unchanged to every bench-worker rank.
#pragma once

#include <cstdint>
#include <cstdio>
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
  // Fused matmul benchmarks (all-gather-matmul, matmul-reduce-scatter, matmul-all-reduce).
  int64_t m = 2048;       // --m: global rows (all-gather-matmul: m·R, the gathered rows)
  int64_t k = 4096;       // --k: total k (matmul-*: each rank holds k/R columns of x1)
  int64_t n = 4096;       // --n
  int64_t comm_turn = 0;  // --comm-turn
  std::string trace;      // --trace FILE: COMMFUSE_TRACE for the fused op
  // alltoall-quant-matmul / alltoall-matmul (bench_alltoall.cpp): global problem shape.
  int64_t bs = 4096, h = 2048;  // and --n above
  std::string combo = "a16w8";  // a16w8 | a16w4 | a4w4
  // quant-all-reduce / quant-reduce-scatter only (-b/-e are then elements):
  std::string scales = "kg";          // kg (fp32 per 128) | mx (e8m0 per 32)
  std::string out_dtype = "float32";  // float32 | float16 | bfloat16
};

// One rank of a fused-operator benchmark (bench_fused.cpp); rank 0 prints and writes json.
}  // namespace commfuse::cli
namespace commfuse {
class Comm;
}
namespace commfuse::cli {
int run_fused_bench(const BenchOptions& o, Comm& comm, FILE* json);

// True for the fused-operator benchmarks (bench_fused.cpp), false for the collectives.
bool is_fused_bench(const std::string& op);

// Parses argv after the sub-command name. Throws InvalidArgument with a message naming
// the bad option.
BenchOptions parse_bench_options(const std::vector<std::string>& args);
// The same options as command-line arguments (for the workers).
std::vector<std::string> to_args(const BenchOptions& o);
// "4K", "64M", "1G", "4096" -> bytes.
uint64_t parse_size(const std::string& s);

}  // namespace commfuse::cli

namespace commfuse {
class Comm;
}

namespace commfuse::cli {

// One rank of `commfuse bench alltoall-quant-matmul|alltoall-matmul` (bench_alltoall.cpp),
// inside bench-worker (MPI initialised, comm created). Returns the exit code.
int bench_alltoall(const BenchOptions& o, Comm& comm);

}  // namespace commfuse::cli
