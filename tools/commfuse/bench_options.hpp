// Options of `commfuse bench <benchmark>`, parsed once by the parent and passed on
// unchanged to every bench-worker rank. Which benchmarks and options exist, their defaults
// and help, is the table in bench_catalog.cpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace commfuse::cli {

// Benchmarks that take the same options and run the same worker code.
enum BenchFamily : unsigned {
  kCollective = 1u << 0,   // all-reduce, all-gather, reduce-scatter, all-to-all
  kFusedMatmul = 1u << 1,  // all-gather-matmul, matmul-reduce-scatter, matmul-all-reduce
  kAlltoAllQuantMatmul = 1u << 2,
  kAlltoAllMatmul = 1u << 3,
  kQuantReduce = 1u << 4,  // quant-all-reduce, quant-reduce-scatter
  kAllFamilies = (1u << 5) - 1,
};

// Every field is set from the option table's defaults before the arguments are read.
struct BenchOptions {
  std::string op;  // the benchmark's name, e.g. all-reduce
  BenchFamily family = kCollective;
  int nprocs = 0;          // -n
  uint64_t min_bytes = 0;  // -b (quant-*: elements)
  uint64_t max_bytes = 0;  // -e (quant-*: elements)
  double factor = 0;       // -f
  std::string dtype;
  std::string transport;  // shm | mpi
  int iters = 0;          // 0: chosen per size (more for small messages)
  int warmup = 0;
  int rounds = 0;    // alternating commfuse / baseline rounds; the median is reported
  std::string json;  // --json FILE: one JSON object per row
  int port = 0;      // bench-worker only: bootstrap port chosen by the parent
  // Fused matmul benchmarks (all-gather-matmul, matmul-reduce-scatter, matmul-all-reduce).
  int64_t m = 0;              // --m: global rows (all-gather-matmul: m·R, the gathered rows)
  int64_t k = 0;              // --k: total k (matmul-*: each rank holds k/R columns of x1)
  int64_t n = 0;              // --n
  int64_t comm_turn = 0;      // --comm-turn
  int64_t packed_x2 = 0;      // --packed-x2: 1 = x2 packed once ahead (PackedWeight)
  int64_t gather_output = 1;  // --gather-output: 0 = all-gather-matmul returns no gather_out
  std::string trace;          // --trace FILE: COMMFUSE_TRACE for the fused op
  // --netns NS[,NS...]: rank r runs in network namespace NS[r % count] (`ip netns exec`),
  // --transport mpi only; the parent's concern, ignored by the workers.
  std::vector<std::string> netns;
  // alltoall-quant-matmul / alltoall-matmul (bench_alltoall.cpp): global problem shape.
  int64_t bs = 0, h = 0;  // and --n above
  std::string combo;      // a16w8 | a16w4 | a4w4
  // quant-all-reduce / quant-reduce-scatter only (-b/-e are then elements):
  std::string scales;     // kg (fp32 per 128) | mx (e8m0 per 32)
  std::string out_dtype;  // float32 | float16 | bfloat16
};

// Parses argv after the sub-command name: the benchmark's name, then its options. Throws
// UsageError (cli_args.hpp) naming the bad option and value. --port is accepted only from
// the parent (`internal`): for a user it would be overwritten.
BenchOptions parse_bench_options(const std::vector<std::string>& args, bool internal = false);
// The same options as command-line arguments (for the workers).
std::vector<std::string> to_args(const BenchOptions& o);

// The sizes a -b/-e/-f sweep visits, smallest first, -e at most: each the previous times
// F, and at least one more (an F barely above 1 would repeat a size without end). Throws
// UsageError beyond kMaxSweepRows sizes.
constexpr size_t kMaxSweepRows = 1000;
std::vector<uint64_t> sweep_sizes(const BenchOptions& o);

}  // namespace commfuse::cli

namespace commfuse {
class Comm;
}

namespace commfuse::cli {

class JsonRows;  // bench_json.hpp

// One rank of a fused-operator benchmark (bench_fused.cpp); rank 0 prints and writes json.
int run_fused_bench(const BenchOptions& o, Comm& comm, JsonRows* json);
// The same for a quantized --dtype (SPEC §6; bench_quant_matmul.cpp).
int run_quant_matmul_bench(const BenchOptions& o, Comm& comm, JsonRows* json);

// One rank of `commfuse bench alltoall-quant-matmul|alltoall-matmul` (bench_alltoall.cpp),
// inside bench-worker (MPI initialised, comm created). Returns the exit code.
int bench_alltoall(const BenchOptions& o, Comm& comm);

}  // namespace commfuse::cli
