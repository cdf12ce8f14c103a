// Reads `commfuse bench` arguments against the option table (bench_catalog.cpp), then the
// checks that involve more than one option.
#include "bench_options.hpp"

#include <commfuse/commfuse.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "bench_catalog.hpp"
#include "cli_args.hpp"
#include "kernels/cpu/reduce.hpp"

namespace commfuse::cli {
namespace {

// The collectives' benchmark fills its inputs with small integers converted from float32
// (bench_worker.cpp), and all-reduce / reduce-scatter sum them: a dtype the library cannot
// convert to, or sum, is a usage error here rather than a failed run in every worker.
void check_collective_dtype(const BenchOptions& o) {
  const DType t = dtype_from_name(o.dtype);  // byte_dtype checked the name
  try {
    const float one = 1.0f;
    uint64_t out = 0;
    convert(&one, DType::kFloat32, &out, t, 1);
  } catch (const Error&) {
    throw UsageError("--dtype " + o.dtype +
                     ": the benchmark converts its inputs from float32, and convert has no "
                     "rules for it (a data-movement dtype)");
  }
  if ((o.op == "all-reduce" || o.op == "reduce-scatter") && !kernels::cpu::reducible(t))
    throw UsageError("--dtype " + o.dtype + " cannot be summed by " + o.op + " (only " +
                     kernels::cpu::reducible_names() + ")");
}

// The bytes a benchmark's W ranks allocate at least (a matmul's operands and one output per
// rank, a collective's largest row three times, a quantized reduction's codes, output and
// MPI's float32 buffers; each adds more), against this host's memory: a size past it is a
// usage error naming the options, where it was a failed allocation (or a size past size_t)
// in every worker, ended through MPI_Abort (--k 2^62: "cannot create std::vector larger than
// max_size()"; all-reduce -e 1024G: std::bad_alloc). long double: the products of three
// options overflow 64 bits.
void check_memory(const BenchOptions& o) {
  const long double w = o.nprocs, n = static_cast<long double>(o.n);
  const DType t = dtype_from_name(o.dtype);  // the --dtype lists hold the library's names
  long double per_rank = 0;
  std::string shape, what;
  if (o.family == kFusedMatmul || (o.family & (kAlltoAllQuantMatmul | kAlltoAllMatmul))) {
    // Bytes per element: the fused ops' operands are --dtype, the all-to-all ops' counted as
    // their int8 weights (a lower bound); the outputs are float32 for float32 and 2-byte
    // floats otherwise.
    const bool fused = o.family == kFusedMatmul;
    const long double in_bytes = fused ? dtype_bits(t) / 8.0L : 1;
    const long double out_bytes = t == DType::kFloat32 ? 4 : 2;
    if (fused) {
      const long double m = static_cast<long double>(o.m), k = static_cast<long double>(o.k);
      per_rank = in_bytes * (m * k + k * n) / w + out_bytes * m * n / w;
      shape = "--m " + std::to_string(o.m) + " --k " + std::to_string(o.k);
    } else {
      const long double bs = static_cast<long double>(o.bs), h = static_cast<long double>(o.h);
      per_rank = in_bytes * (bs * h + w * h * n) + out_bytes * bs / w * n;
      shape = "--bs " + std::to_string(o.bs) + " --h " + std::to_string(o.h);
    }
    shape += " --n " + std::to_string(o.n);
    what = "the matrices take at least ";
    what.append("%s GiB on this host (operands and one output per rank)");
  } else if (o.family == kCollective) {
    // The largest row (-e: all-gather's result, reduce-scatter's source) as the worker holds
    // it (bench_worker.cpp): the source and its float32 values, commfuse's result, MPI's and
    // the reference, and the reference's float32 values, per rank.
    const auto row = static_cast<long double>(o.max_bytes);
    const long double es = dtype_bits(t) / 8.0L;
    const long double sent = o.op == "all-gather" ? row / w : row;
    const long double received = o.op == "reduce-scatter" ? row / w : row;
    per_rank = sent * (1 + 4 / es) + received * (3 + 4 / es);
    shape = "-e " + std::to_string(o.max_bytes);
    what =
        "the largest row takes at least %s GiB on this host (source, results and their "
        "float32 values per rank)";
  } else if (o.family == kQuantReduce) {
    // The largest row's elements: the codes, the output, MPI's float32 input and output.
    const auto out = static_cast<long double>(dtype_bits(dtype_from_name(o.out_dtype)) / 8);
    per_rank = (1 + out + 8) * static_cast<long double>(o.max_bytes);
    shape = "-e " + std::to_string(o.max_bytes);
    what =
        "the largest row takes at least %s GiB on this host (codes, output and MPI's "
        "float32 input and output per rank)";
  } else {
    return;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return;  // unknown: the workers' allocations will say
  const long double host = static_cast<long double>(pages) * page_bytes;
  if (w * per_rank <= host) return;
  char need[64], have[64], text[512];
  std::snprintf(need, sizeof need, "%.3Lg", w * per_rank / (1024.0L * 1024 * 1024));
  std::snprintf(have, sizeof have, "%.3Lg", host / (1024.0L * 1024 * 1024));
  std::snprintf(text, sizeof text, what.c_str(), need);
  throw UsageError(shape + " -n " + std::to_string(o.nprocs) + ": " + text + ", which has " + have +
                   " GiB of memory");
}

const BenchOptionSpec* find_option(std::string_view name, unsigned family, bool internal) {
  for (const auto& s : bench_option_specs())
    if ((s.families & family) &&
        (name == s.long_name || (!s.short_name.empty() && name == s.short_name)) &&
        (internal || !s.help.empty()))
      return &s;
  return nullptr;
}

}  // namespace

BenchOptions parse_bench_options(const std::vector<std::string>& args, bool internal) {
  if (args.empty()) throw UsageError("which benchmark? (run 'commfuse bench --help' for the list)");
  const BenchInfo* bench = find_bench(args[0]);
  if (bench == nullptr)
    throw UsageError("unknown benchmark '" + args[0] + "'", "commfuse bench --help");
  const std::string help = "commfuse bench " + args[0] + " --help";
  BenchOptions o;
  o.op = bench->name;
  o.family = bench->family;
  for (const auto& s : bench_option_specs())
    if (s.families & bench->family) s.set(o, s.long_name, s.default_value);

  try {
    for (size_t i = 1; i < args.size(); ++i) {
      const std::string_view arg = args[i];
      // "--iters=5" and "-n2" as well as "--iters 5" and "-n 2".
      std::string_view name = arg, value;
      bool attached = false;
      if (arg.starts_with("--") && arg.find('=') != std::string_view::npos) {
        name = arg.substr(0, arg.find('='));
        value = arg.substr(arg.find('=') + 1);
        attached = true;
      } else if (arg.size() > 2 && arg[0] == '-' && arg[1] != '-') {
        name = arg.substr(0, 2);
        value = arg.substr(2);
        attached = true;
      }
      const BenchOptionSpec* spec = find_option(name, bench->family, internal);
      if (spec == nullptr) {
        if (!arg.starts_with("-"))
          throw UsageError("unexpected argument '" + std::string(arg) + "'");
        if (find_option(name, kAllFamilies, internal))
          throw UsageError(std::string(name) + " is not an option of " + o.op);
        throw UsageError("unknown option '" + std::string(arg) + "'");
      }
      if (!attached) {
        if (i + 1 >= args.size()) throw UsageError(std::string(name) + " needs a value");
        value = args[++i];
      }
      spec->set(o, name, value);
    }

    if (o.min_bytes > o.max_bytes)
      throw UsageError("-b " + std::to_string(o.min_bytes) + " is larger than -e " +
                       std::to_string(o.max_bytes));
    if (o.family & (kCollective | kQuantReduce)) sweep_sizes(o);  // -f's row count
    if (o.family == kCollective) check_collective_dtype(o);
    auto multiple = [&](const char* option, int64_t v) {
      if (v % o.nprocs != 0)
        throw UsageError(std::string(option) + " " + std::to_string(v) +
                         " is not a multiple of -n " + std::to_string(o.nprocs));
    };
    if (o.family == kFusedMatmul) {
      multiple("--m", o.m);
      if (o.op != "all-gather-matmul") multiple("--k", o.k);  // each rank holds k/W of x1
      if (o.op != "all-gather-matmul" && o.gather_output != 1)
        throw UsageError("--gather-output 0 is for all-gather-matmul only (" + o.op +
                         " gathers no x1)");
    }
    check_memory(o);
    if (!o.netns.empty() && o.transport != "mpi")
      throw UsageError("--netns needs --transport mpi (shared memory does not cross a network)");
    if (o.family & (kAlltoAllQuantMatmul | kAlltoAllMatmul)) multiple("--bs", o.bs);
    if (o.family == kQuantReduce && o.scales == "mx" && o.dtype != "float8_e4m3fn" &&
        o.dtype != "float8_e5m2")
      throw UsageError("--scales mx takes --dtype float8_e4m3fn or float8_e5m2, not " + o.dtype);
    if (o.family == kAlltoAllQuantMatmul && o.combo == "a4w4" && o.h % 2 != 0)
      throw UsageError("--combo a4w4 needs an even --h (two int4 values a byte), not " +
                       std::to_string(o.h));
    if (o.family == kAlltoAllQuantMatmul && o.combo != "a16w8" && o.n % 2 != 0)
      throw UsageError("--combo " + o.combo +
                       " needs an even --n (the int4 x2's rows hold two values a byte), not " +
                       std::to_string(o.n));
    // PackedWeight holds the 16-bit and 32-bit floats and int8/int4 weights; A4W4's x2 and
    // the 8-bit float x2s have none.
    if (o.packed_x2 != 0 && o.family == kAlltoAllQuantMatmul && o.combo == "a4w4")
      throw UsageError("--packed-x2 1 takes --combo a16w8 or a16w4 (A4W4 has no PackedWeight)");
    if (o.packed_x2 != 0 && o.family == kFusedMatmul &&
        (o.dtype == "float8_e4m3fn" || o.dtype == "float8_e5m2" || o.dtype == "hifloat8"))
      throw UsageError("--packed-x2 1 takes --dtype float32, float16, bfloat16 or int8, not " +
                       o.dtype + " (8-bit float weights have no PackedWeight)");
  } catch (const UsageError& e) {
    throw UsageError(e.what(), help);
  }
  return o;
}

std::vector<uint64_t> sweep_sizes(const BenchOptions& o) {
  std::vector<uint64_t> sizes;
  // The top by a hair, so that -e itself is reached although F^k·b is rounded; a size past
  // -e is taken as -e, the last row.
  const double top = static_cast<double>(o.max_bytes) * 1.0001;
  for (double b = static_cast<double>(o.min_bytes); b <= top;) {
    if (sizes.size() == kMaxSweepRows) {
      char f[32];
      std::snprintf(f, sizeof f, "%.10g", o.factor);  // 1.0000001, not "1"
      throw UsageError("-f " + std::string(f) + " makes more than " +
                       std::to_string(kMaxSweepRows) + " sizes from -b " +
                       std::to_string(o.min_bytes) + " to -e " + std::to_string(o.max_bytes) +
                       " (take a larger F)");
    }
    sizes.push_back(std::min(static_cast<uint64_t>(b), o.max_bytes));
    if (sizes.back() == o.max_bytes) break;
    // In double: F·b may pass 2^64, which no integer holds.
    const double next = b * o.factor;
    b = next >= static_cast<double>(sizes.back()) + 1 ? next
                                                      : static_cast<double>(sizes.back() + 1);
  }
  return sizes;
}

std::vector<std::string> to_args(const BenchOptions& o) {
  std::vector<std::string> args = {o.op};
  for (const auto& s : bench_option_specs()) {
    if (!(s.families & o.family)) continue;
    args.emplace_back(s.long_name);
    args.push_back(s.get(o));
  }
  return args;
}

}  // namespace commfuse::cli
