#include "bench_catalog.hpp"

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "cli_args.hpp"

namespace commfuse::cli {
namespace {

constexpr BenchInfo kBenchmarks[] = {
    {"all-reduce", kCollective, "Comm::all_reduce (sum) vs MPI_Allreduce"},
    {"all-gather", kCollective, "Comm::all_gather vs MPI_Allgather"},
    {"reduce-scatter", kCollective, "Comm::reduce_scatter (sum) vs MPI_Reduce_scatter_block"},
    {"all-to-all", kCollective, "Comm::all_to_all vs MPI_Alltoall"},
    {"all-gather-matmul", kFusedMatmul, "AllGatherMatmul vs all_gather, then the same GEMM"},
    {"matmul-reduce-scatter", kFusedMatmul,
     "MatmulReduceScatter vs the GEMM, then reduce_scatter (fp32)"},
    {"matmul-all-reduce", kFusedMatmul, "MatmulAllReduce vs the GEMM, then all_reduce (fp32)"},
    {"alltoall-quant-matmul", kAlltoAllQuantMatmul,
     "AlltoAllQuantMatmul vs all_to_all, permute, quantize, int GEMM, dequant as separate "
     "passes"},
    {"alltoall-matmul", kAlltoAllMatmul, "AlltoAllMatmul vs all_to_all, permute, the same GEMM"},
    {"quant-all-reduce", kQuantReduce,
     "QuantAllReduce vs MPI_Allreduce float32 and commfuse's bfloat16/float32 all_reduce"},
    {"quant-reduce-scatter", kQuantReduce,
     "QuantReduceScatter vs MPI_Reduce_scatter_block float32 and commfuse's reduce_scatter"},
};

constexpr BenchFamilyInfo kFamilies[] = {
    {kCollective, "collectives",
     "one row per size, nccl-tests columns (time, algbw, busbw, #wrong), OpenMPI's collective "
     "timed in the same processes; #wrong compares with OpenMPI's result bitwise"},
    {kFusedMatmul, "fused matmul operators",
     "one row: the fused op; unfused = commfuse's collective and the same oneDNN GEMM; unfused_mpi "
     "= the same with OpenMPI's collective; the GEMM alone on the same work; exposed_comm = (fused "
     "- gemm) / (unfused - gemm), 0 = communication fully hidden"},
    {kAlltoAllQuantMatmul, "all-to-all, then quantized matmul",
     "one row: the fused op; the unfused quantized pipeline; all_to_all, permute and a "
     "float16/bfloat16 GEMM (oneDNN); mpi_path = the same with OpenMPI's MPI_Alltoall (plain MPI "
     "+ oneDNN); #wrong compares fused and unfused bitwise"},
    {kAlltoAllMatmul, "all-to-all, then matmul",
     "one row: the fused op; all_to_all, permute and the same GEMM (oneDNN); mpi_path = the same "
     "with OpenMPI's MPI_Alltoall (plain MPI + oneDNN)"},
    {kQuantReduce, "quantized reductions",
     "one row per size in elements of the logical tensor (rows of 1024 per rank), checked against "
     "a float64 sum of every rank's dequantized input"},
};

template <typename T>
constexpr int64_t max_of() {
  return static_cast<int64_t>(std::numeric_limits<T>::max());
}

// Setters and getters for a field, by member pointer, so the table below stays one line per
// option. Max < 0: the field type's maximum.
template <auto Field, int64_t Min, int64_t Max = -1>
void set_integer(BenchOptions& o, std::string_view option, std::string_view value) {
  using T = std::remove_reference_t<decltype(o.*Field)>;
  o.*Field = static_cast<T>(parse_integer(option, value, Min, Max < 0 ? max_of<T>() : Max));
}
template <auto Field>
std::string get_integer(const BenchOptions& o) {
  return std::to_string(o.*Field);
}
template <auto Field>
void set_size(BenchOptions& o, std::string_view option, std::string_view value) {
  o.*Field = parse_size(option, value);
}
template <auto Field>
std::string get_string(const BenchOptions& o) {
  return o.*Field;
}
// "-" stands for "no file", so that the parent can pass the option on unconditionally.
template <auto Field>
void set_file(BenchOptions& o, std::string_view, std::string_view value) {
  o.*Field = value == "-" ? std::string() : std::string(value);
}
template <auto Field>
std::string get_file(const BenchOptions& o) {
  return (o.*Field).empty() ? std::string("-") : o.*Field;
}

// Namespace names as `ip netns` accepts them: no path separators, nothing a shell or
// mpirun's command line would split.
void set_netns(BenchOptions& o, std::string_view option, std::string_view value) {
  o.netns.clear();
  if (value == "-") return;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t end = std::min(value.find(',', start), value.size());
    const std::string_view name = value.substr(start, end - start);
    const bool ok = !name.empty() && name != "." && name != ".." &&
                    name.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_.-") == std::string_view::npos;
    if (!ok)
      throw UsageError(std::string(option) + " '" + std::string(value) +
                       "': each namespace name is letters, digits, '_', '.' or '-'");
    o.netns.emplace_back(name);
    start = end + 1;
  }
}
std::string get_netns(const BenchOptions& o) {
  std::string s;
  for (const auto& n : o.netns) s += (s.empty() ? "" : ",") + n;
  return s.empty() ? std::string("-") : s;
}

std::string one_of(std::string_view option, std::string_view value,
                   std::initializer_list<std::string_view> choices) {
  std::string list;
  for (const auto c : choices) {
    if (c == value) return std::string(value);
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw UsageError(std::string(option) + ": '" + std::string(value) + "' is not one of " + list);
}

// A dtype name the library knows, of at least 8 bits (the collectives move whole bytes).
std::string byte_dtype(std::string_view option, std::string_view value) {
  int bits = 0;
  try {
    bits = dtype_bits(dtype_from_name(value));
  } catch (const Error&) {
    throw UsageError(std::string(option) + ": '" + std::string(value) +
                     "' is not a dtype name (float32, float16, bfloat16, int32, int8, ...)");
  }
  if (bits < 8)
    throw UsageError(std::string(option) + ": '" + std::string(value) +
                     "' is narrower than a byte");
  return std::string(value);
}

constexpr unsigned kAlltoAll = kAlltoAllQuantMatmul | kAlltoAllMatmul;

void set_factor(BenchOptions& o, std::string_view option, std::string_view value) {
  o.factor = parse_real(option, value, 1.0, true);
}
std::string get_factor(const BenchOptions& o) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.17g", o.factor);  // exact: the workers sweep the same sizes
  return b;
}

// Rows of one family are contiguous, in the order --help lists them; an option whose meaning
// differs between families has a row in each.
constexpr BenchOptionSpec kOptions[] = {
    // Every benchmark.
    {"-n", "--nprocs", "W", kAllFamilies, "2", "ranks to start under mpirun, 1..256",
     set_integer<&BenchOptions::nprocs, 1, 256>, get_integer<&BenchOptions::nprocs>},
    {"", "--transport", "shm|mpi", kAllFamilies, "shm",
     "commfuse's transport: shm (shared memory) or mpi (MPI over TCP, as between machines; "
     "OpenMPI's baseline then uses TCP too)",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.transport = one_of(opt, v, {"shm", "mpi"});
     },
     get_string<&BenchOptions::transport>},
    {"", "--rounds", "N", kAllFamilies, "5",
     "timed rounds, alternating the variants; the median is reported (at least 1)",
     set_integer<&BenchOptions::rounds, 1>, get_integer<&BenchOptions::rounds>},
    {"", "--json", "FILE", kAllFamilies, "-", "rank 0 writes one JSON object per row to FILE",
     set_file<&BenchOptions::json>, get_file<&BenchOptions::json>},
    {"", "--trace", "FILE", kAllFamilies, "-",
     "every rank's trace events (COMMFUSE_TRACE) go to FILE, emptied first",
     set_file<&BenchOptions::trace>, get_file<&BenchOptions::trace>},
    {"", "--netns", "NS[,NS...]", kAllFamilies, "-",
     "with --transport mpi: rank r runs in network namespace NS[r % count] (ip netns exec), so "
     "its traffic crosses whatever links them (bench/netns.sh makes a rate-limited pair)",
     set_netns, get_netns},
    {"", "--port", "P", kAllFamilies, "0", "", set_integer<&BenchOptions::port, 0, 65535>,
     get_integer<&BenchOptions::port>},

    // Collectives.
    {"-b", "--minbytes", "SIZE", kCollective, "4K",
     "smallest message in bytes; SIZE is a count with an optional K, M or G (x1024)",
     set_size<&BenchOptions::min_bytes>, get_integer<&BenchOptions::min_bytes>},
    {"-e", "--maxbytes", "SIZE", kCollective, "64M", "largest message in bytes",
     set_size<&BenchOptions::max_bytes>, get_integer<&BenchOptions::max_bytes>},
    {"-f", "--stepfactor", "F", kCollective, "2",
     "each row's size is the previous one times F (a number > 1; at most 1000 sizes, and one "
     "that rounds to the previous row's is skipped)",
     set_factor, get_factor},
    {"", "--dtype", "T", kCollective, "float32",
     "element type of 8 bits or more (float32, float16, bfloat16, int32, int8, ...); OpenMPI "
     "cannot sum float16/bfloat16: its column is then n/a",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.dtype = byte_dtype(opt, v);
     },
     get_string<&BenchOptions::dtype>},
    {"", "--iters", "N", kCollective, "0",
     "timed iterations per round and size; 0: by size (5..2000, about 256 MiB a round)",
     set_integer<&BenchOptions::iters, 0>, get_integer<&BenchOptions::iters>},
    {"", "--warmup", "N", kCollective, "3",
     "untimed runs of each variant per size, plus a tenth of the iterations (up to 50)",
     set_integer<&BenchOptions::warmup, 0>, get_integer<&BenchOptions::warmup>},

    // Fused matmul operators.
    {"", "--m", "M", kFusedMatmul, "2048",
     "global rows, a multiple of -n: all-gather-matmul gathers M rows (M/W per rank); the reducing "
     "ops' x1 has M rows on every rank",
     set_integer<&BenchOptions::m, 1>, get_integer<&BenchOptions::m>},
    {"", "--k", "K", kFusedMatmul, "4096",
     "inner dimension; matmul-reduce-scatter/-all-reduce: each rank holds K/W of it (a multiple of "
     "-n)",
     set_integer<&BenchOptions::k, 1>, get_integer<&BenchOptions::k>},
    {"", "--n", "N", kFusedMatmul, "4096", "columns of x2 and of the output",
     set_integer<&BenchOptions::n, 1>, get_integer<&BenchOptions::n>},
    {"", "--comm-turn", "C", kFusedMatmul, "0",
     "the op's comm_turn: 0 = automatic chunking, 1..64 = each rank's rows in C chunks",
     set_integer<&BenchOptions::comm_turn, 0, 64>, get_integer<&BenchOptions::comm_turn>},
    {"", "--packed-x2", "P", kFusedMatmul | kAlltoAll, "0",
     "1: x2 packed once ahead (PackedWeight, passed as packed_x2) for the fused op, and likewise "
     "for the unfused composition's and the GEMM alone's GEMM (packed before the timed calls); "
     "float32 (read as given: nothing to pack), float16/bfloat16 (packed where this machine has a "
     "native kernel), int8 (A8W8; "
     "alltoall-quant-matmul a16w8 and a16w4); the alltoall benchmarks' 16-bit path's x2 is packed "
     "too",
     set_integer<&BenchOptions::packed_x2, 0, 1>, get_integer<&BenchOptions::packed_x2>},
    {"", "--gather-output", "G", kFusedMatmul, "1",
     "all-gather-matmul: 1 = the op also returns the gathered x1 (gather_out), 0 = it does not "
     "(gather_output false: the fused schedule may multiply the peers' rows where they are); the "
     "unfused composition gathers into a buffer of its own either way",
     set_integer<&BenchOptions::gather_output, 0, 1>, get_integer<&BenchOptions::gather_output>},
    {"", "--dtype", "T", kFusedMatmul, "float32",
     "x1, x2 and output: float32, float16 or bfloat16; or quantized x1 and x2 (SPEC §6) int8, "
     "float8_e4m3fn, float8_e5m2, hifloat8, bfloat16 output, timed against the op's unfused "
     "algorithm and the bfloat16 op",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.dtype = one_of(
           opt, v,
           {"float32", "float16", "bfloat16", "int8", "float8_e4m3fn", "float8_e5m2", "hifloat8"});
     },
     get_string<&BenchOptions::dtype>},
    {"", "--iters", "N", kFusedMatmul, "0",
     "timed iterations per round; 0: about 0.3 s of each variant (1..100000)",
     set_integer<&BenchOptions::iters, 0>, get_integer<&BenchOptions::iters>},

    // All-to-all, then (quantized) matmul.
    {"", "--bs", "BS", kAlltoAll, "4096", "rows of each rank's x1, a multiple of -n",
     set_integer<&BenchOptions::bs, 1>, get_integer<&BenchOptions::bs>},
    {"", "--h", "H", kAlltoAll, "2048", "columns of each rank's x1; the GEMM's k is H*W",
     set_integer<&BenchOptions::h, 1>, get_integer<&BenchOptions::h>},
    {"", "--n", "N", kAlltoAll, "4096", "columns of x2 and of the output",
     set_integer<&BenchOptions::n, 1>, get_integer<&BenchOptions::n>},
    {"", "--combo", "C", kAlltoAllQuantMatmul, "a16w8",
     "a16w8: int8 weights; a16w4: int4 weights; a4w4: int4 x1 with per-token scales and int4 "
     "weights (needs an even --h; output bfloat16)",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.combo = one_of(opt, v, {"a16w8", "a16w4", "a4w4"});
     },
     get_string<&BenchOptions::combo>},
    {"", "--dtype", "T", kAlltoAllQuantMatmul, "bfloat16", "x1 and output: float16 or bfloat16",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.dtype = one_of(opt, v, {"float16", "bfloat16"});
     },
     get_string<&BenchOptions::dtype>},
    {"", "--dtype", "T", kAlltoAllMatmul, "bfloat16",
     "x1, x2 and output: float32, float16 or bfloat16",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.dtype = one_of(opt, v, {"float32", "float16", "bfloat16"});
     },
     get_string<&BenchOptions::dtype>},
    {"", "--iters", "N", kAlltoAll, "1", "timed iterations per round (at least 1)",
     set_integer<&BenchOptions::iters, 1>, get_integer<&BenchOptions::iters>},
    {"", "--warmup", "N", kAlltoAll, "3", "untimed runs of each variant before timing (at least 1)",
     set_integer<&BenchOptions::warmup, 1>, get_integer<&BenchOptions::warmup>},

    // Quantized reductions: a sweep like the collectives', in elements.
    {"-b", "--minbytes", "SIZE", kQuantReduce, "4K",
     "smallest tensor in elements (rounded down to whole 1024-element rows per rank); SIZE is a "
     "count with an optional K, M or G (x1024)",
     set_size<&BenchOptions::min_bytes>, get_integer<&BenchOptions::min_bytes>},
    {"-e", "--maxbytes", "SIZE", kQuantReduce, "64M", "largest tensor in elements",
     set_size<&BenchOptions::max_bytes>, get_integer<&BenchOptions::max_bytes>},
    {"-f", "--stepfactor", "F", kQuantReduce, "2",
     "each row's size is the previous one times F (a number > 1; at most 1000 sizes, and one "
     "that rounds to the previous row's is skipped)",
     set_factor, get_factor},
    {"", "--dtype", "T", kQuantReduce, "int8",
     "quantized x: int8, hifloat8, float8_e4m3fn or float8_e5m2",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.dtype = one_of(opt, v, {"int8", "hifloat8", "float8_e4m3fn", "float8_e5m2"});
     },
     get_string<&BenchOptions::dtype>},
    {"", "--scales", "kg|mx", kQuantReduce, "kg",
     "kg: a float32 scale per 128 elements (per_token_group); mx: an e8m0 scale per 32 (with "
     "float8_e4m3fn or float8_e5m2)",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.scales = one_of(opt, v, {"kg", "mx"});
     },
     get_string<&BenchOptions::scales>},
    {"", "--out-dtype", "T", kQuantReduce, "float32", "output: float32, float16 or bfloat16",
     [](BenchOptions& o, std::string_view opt, std::string_view v) {
       o.out_dtype = one_of(opt, v, {"float32", "float16", "bfloat16"});
     },
     get_string<&BenchOptions::out_dtype>},
    {"", "--iters", "N", kQuantReduce, "0",
     "timed iterations per round and size; 0: by size (3..500, about 64 Mi elements)",
     set_integer<&BenchOptions::iters, 0>, get_integer<&BenchOptions::iters>},
    {"", "--warmup", "N", kQuantReduce, "3",
     "untimed runs of each variant per size, plus a tenth of the iterations (up to 20)",
     set_integer<&BenchOptions::warmup, 0>, get_integer<&BenchOptions::warmup>},
};

}  // namespace

std::span<const BenchInfo> bench_catalog() {
  return kBenchmarks;
}
std::span<const BenchFamilyInfo> bench_families() {
  return kFamilies;
}
std::span<const BenchOptionSpec> bench_option_specs() {
  return kOptions;
}

const BenchInfo* find_bench(std::string_view name) {
  for (const auto& b : kBenchmarks)
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace commfuse::cli
