#include "bench_options.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace commfuse::cli {

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  CF_CHECK_ARG(end != s.c_str() && v >= 0, "bench: size '", s, "' is not a number");
  double mult = 1;
  const std::string unit(end);
  if (unit == "K" || unit == "k" || unit == "KiB")
    mult = 1024;
  else if (unit == "M" || unit == "m" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else
    CF_CHECK_ARG(unit.empty() || unit == "B", "bench: size unit in '", s, "' is not K, M or G");
  return static_cast<uint64_t>(v * mult);
}

BenchOptions parse_bench_options(const std::vector<std::string>& args) {
  BenchOptions o;
  CF_CHECK_ARG(!args.empty(),
               "bench: which collective? (all-gather, all-reduce, reduce-scatter, "
               "all-to-all)");
  o.op = args[0];
  CF_CHECK_ARG(o.op == "all-gather" || o.op == "all-reduce" || o.op == "reduce-scatter" ||
                   o.op == "all-to-all" || is_fused_bench(o.op) ||
                   o.op == "alltoall-quant-matmul" || o.op == "alltoall-matmul" ||
                   o.op == "quant-all-reduce" || o.op == "quant-reduce-scatter",
               "bench: unknown benchmark '", o.op,
               "' (all-gather, all-reduce, reduce-scatter, all-to-all, all-gather-matmul, "
               "matmul-reduce-scatter, matmul-all-reduce, alltoall-quant-matmul, alltoall-matmul, "
               "quant-all-reduce, quant-reduce-scatter)");
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      CF_CHECK_ARG(i + 1 < args.size(), "bench: option ", a, " needs a value");
      return args[++i];
    };
    if (a == "-n" || a == "--nprocs")
      o.nprocs = std::atoi(value().c_str());
    else if (a == "-b" || a == "--minbytes")
      o.min_bytes = parse_size(value());
    else if (a == "-e" || a == "--maxbytes")
      o.max_bytes = parse_size(value());
    else if (a == "-f" || a == "--stepfactor")
      o.factor = std::atof(value().c_str());
    else if (a == "--dtype")
      o.dtype = value();
    else if (a == "--transport")
      o.transport = value();
    else if (a == "--iters")
      o.iters = std::atoi(value().c_str());
    else if (a == "--warmup")
      o.warmup = std::atoi(value().c_str());
    else if (a == "--rounds")
      o.rounds = std::atoi(value().c_str());
    else if (a == "--json")
      o.json = value() == "-" ? std::string() : args[i];
    else if (a == "--port")
      o.port = std::atoi(value().c_str());
    else if (a == "--m")
      o.m = std::atoll(value().c_str());
    else if (a == "--k")
      o.k = std::atoll(value().c_str());
    else if (a == "--n")
      o.n = std::atoll(value().c_str());
    else if (a == "--comm-turn")
      o.comm_turn = std::atoll(value().c_str());
    else if (a == "--trace")
      o.trace = value() == "-" ? std::string() : args[i];
    else if (a == "--bs")
      o.bs = std::atoll(value().c_str());
    else if (a == "--h")
      o.h = std::atoll(value().c_str());
    else if (a == "--combo")
      o.combo = value();
    else if (a == "--scales")
      o.scales = value();
    else if (a == "--out-dtype")
      o.out_dtype = value();
    else
      CF_CHECK_ARG(false, "bench: unknown option '", a, "'");
  }
  CF_CHECK_ARG(o.nprocs >= 1 && o.nprocs <= 256, "bench: -n ", o.nprocs, " must be in [1, 256]");
  CF_CHECK_ARG(o.min_bytes >= 1 && o.min_bytes <= o.max_bytes, "bench: -b ", o.min_bytes,
               " must be >= 1 and <= -e ", o.max_bytes);
  CF_CHECK_ARG(o.factor > 1.0, "bench: -f ", o.factor, " must be > 1");
  CF_CHECK_ARG(o.transport == "shm" || o.transport == "mpi", "bench: --transport '", o.transport,
               "' is not shm or mpi");
  CF_CHECK_ARG(o.iters >= 0 && o.warmup >= 0 && o.rounds >= 1,
               "bench: --iters/--warmup must be "
               ">= 0 and --rounds >= 1");
  CF_CHECK_ARG(o.combo == "a16w8" || o.combo == "a16w4" || o.combo == "a4w4", "bench: --combo '",
               o.combo, "' is not a16w8, a16w4 or a4w4");
  CF_CHECK_ARG(o.bs >= 1 && o.h >= 1 && o.n >= 1, "bench: --bs, --h, --n must be >= 1");
  dtype_from_name(o.dtype);  // validates
  CF_CHECK_ARG(o.m >= 0 && o.k >= 1 && o.n >= 1, "bench: --m must be >= 0, --k and --n >= 1");
  if (is_fused_bench(o.op)) {
    CF_CHECK_ARG(o.m % o.nprocs == 0, "bench: --m ", o.m, " must be a multiple of -n ", o.nprocs);
    if (o.op != "all-gather-matmul")
      CF_CHECK_ARG(o.k % o.nprocs == 0, "bench: --k ", o.k, " must be a multiple of -n ", o.nprocs,
                   " (each rank holds k/R columns of x1)");
  }
  if (o.op.rfind("quant-", 0) == 0) {
    if (o.dtype == "float32") o.dtype = "int8";  // the quantized ops' default
    CF_CHECK_ARG(o.scales == "kg" || o.scales == "mx", "bench: --scales '", o.scales,
                 "' is not kg or mx");
    dtype_from_name(o.out_dtype);
  }
  return o;
}

bool is_fused_bench(const std::string& op) {
  return op == "all-gather-matmul" || op == "matmul-reduce-scatter" || op == "matmul-all-reduce";
}

std::vector<std::string> to_args(const BenchOptions& o) {
  return {o.op,
          "-n",
          std::to_string(o.nprocs),
          "-b",
          std::to_string(o.min_bytes),
          "-e",
          std::to_string(o.max_bytes),
          "-f",
          std::to_string(o.factor),
          "--dtype",
          o.dtype,
          "--transport",
          o.transport,
          "--iters",
          std::to_string(o.iters),
          "--warmup",
          std::to_string(o.warmup),
          "--rounds",
          std::to_string(o.rounds),
          "--json",
          o.json.empty() ? std::string("-") : o.json,
          "--port",
          std::to_string(o.port),
          "--m",
          std::to_string(o.m),
          "--k",
          std::to_string(o.k),
          "--n",
          std::to_string(o.n),
          "--comm-turn",
          std::to_string(o.comm_turn),
          "--trace",
          o.trace.empty() ? std::string("-") : o.trace,
          "--bs",
          std::to_string(o.bs),
          "--h",
          std::to_string(o.h),
          "--combo",
          o.combo,

          "--scales",
          o.scales,
          "--out-dtype",
          o.out_dtype};
}

}  // namespace commfuse::cli
