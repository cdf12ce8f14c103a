// The CLI's value parsers and bench option table in-process (tools/commfuse/cli_args.hpp,
// bench_options.hpp): what is accepted, what is refused, and that the parent's arguments
// for the workers read back as the same options.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench_options.hpp"
#include "cli_args.hpp"

namespace commfuse::cli {
namespace {

// The message of the UsageError that f throws, or "" if it throws none.
template <typename F>
std::string usage_error(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CliArgs, IntegersMustBeWholeAndInRange) {
  EXPECT_EQ(parse_integer("--x", "0", 0), 0);
  EXPECT_EQ(parse_integer("--x", "-7", -10, 10), -7);
  EXPECT_EQ(parse_integer("--x", "9223372036854775807", 0), INT64_MAX);
  EXPECT_EQ(parse_int("-n", "256", 1, 256), 256);
  EXPECT_EQ(usage_error([] { parse_integer("--iters", "abc", 0); }),
            "--iters: 'abc' is not a non-negative integer");
  EXPECT_EQ(usage_error([] { parse_int("-n", "x", 1); }), "-n: 'x' is not a positive integer");
  EXPECT_EQ(usage_error([] { parse_int("-n", "0", 1, 256); }), "-n: '0' must be in 1..256");
  EXPECT_EQ(usage_error([] { parse_integer("--m", "-1", 0); }), "--m: '-1' must be at least 0");
  EXPECT_EQ(usage_error([] { parse_integer("--m", "9223372036854775808", 0); }),
            "--m: '9223372036854775808' must be at least 0");
  EXPECT_EQ(usage_error([] { parse_int("-n", "3000000000", 1); }),
            "-n: '3000000000' must be in 1..2147483647");
  for (const char* bad : {"", " 1", "1 ", "+1", "1.0", "1e3", "0x10", "2x", "--"})
    EXPECT_NE(usage_error([&] { parse_integer("--x", bad, 0); }), "") << "'" << bad << "'";
}

TEST(CliArgs, RealsMustBeFiniteNumbersAboveTheMinimum) {
  EXPECT_EQ(parse_real("-f", "2", 1, true), 2.0);
  EXPECT_EQ(parse_real("-f", "1.5", 1, true), 1.5);
  EXPECT_EQ(parse_real("--grace", "0", 0), 0.0);
  EXPECT_EQ(usage_error([] { parse_real("-f", "1", 1, true); }), "-f: '1' must be greater than 1");
  EXPECT_EQ(usage_error([] { parse_real("--grace", "-1", 0); }),
            "--grace: '-1' must be at least 0");
  for (const char* bad : {"", "x", "2x", "inf", "nan", "1,5", " 2"})
    EXPECT_EQ(usage_error([&] { parse_real("-f", bad, 1, true); }),
              std::string("-f: '") + bad + "' is not a number");
}

TEST(CliArgs, SizesTakeBinarySuffixes) {
  EXPECT_EQ(parse_size("-b", "4096"), 4096u);
  EXPECT_EQ(parse_size("-b", "8B"), 8u);
  EXPECT_EQ(parse_size("-b", "4K"), 4096u);
  EXPECT_EQ(parse_size("-b", "4k"), 4096u);
  EXPECT_EQ(parse_size("-b", "1.5M"), 3u << 19);
  EXPECT_EQ(parse_size("-b", "64MiB"), 64u << 20);
  EXPECT_EQ(parse_size("-b", "1G"), 1u << 30);
  EXPECT_EQ(usage_error([] { parse_size("-b", "4Q"); }),
            "-b: '4Q' is not a size (a number with an optional K, M or G suffix, e.g. 4K)");
  EXPECT_EQ(usage_error([] { parse_size("-b", "0"); }), "-b: '0' must be in 1..2^53");
  EXPECT_EQ(usage_error([] { parse_size("-b", "1.3K"); }), "-b: '1.3K' is not a whole number");
  EXPECT_EQ(usage_error([] { parse_size("-e", "10000000G"); }),
            "-e: '10000000G' must be in 1..2^53");
  for (const char* bad : {"", "K", "-4K", "4 K", " 4K", "4KK", "4MB", "1e3", "inf", "4K4", "."})
    EXPECT_NE(usage_error([&] { parse_size("-b", bad); }), "") << "'" << bad << "'";
}

TEST(CliArgs, BenchDefaultsComeFromTheTablePerFamily) {
  EXPECT_EQ(parse_bench_options({"all-reduce"}).dtype, "float32");
  EXPECT_EQ(parse_bench_options({"quant-all-reduce"}).dtype, "int8");
  EXPECT_EQ(parse_bench_options({"alltoall-quant-matmul"}).dtype, "bfloat16");
  const BenchOptions o = parse_bench_options({"all-reduce"});
  EXPECT_EQ(o.nprocs, 2);
  EXPECT_EQ(o.min_bytes, 4096u);
  EXPECT_EQ(o.max_bytes, 64u << 20);
  EXPECT_EQ(o.factor, 2.0);
  EXPECT_EQ(o.transport, "shm");
  EXPECT_EQ(o.family, kCollective);
}

// What the parent passes to bench-worker must read back as the same options, exactly.
TEST(CliArgs, WorkerArgumentsRoundTrip) {
  const std::vector<std::vector<std::string>> inputs = {
      {"all-gather", "-n", "4", "-b", "1.5K", "--maxbytes=3M", "-f", "1.4142135623730951",
       "--iters=7", "--json", "out.json", "--dtype", "bfloat16"},
      {"matmul-reduce-scatter", "-n4", "--m", "64", "--k", "128", "--n", "32", "--comm-turn", "3",
       "--trace", "t.json"},
      {"all-gather-matmul", "-n", "3", "--m", "6", "--transport", "mpi", "--netns", "cf-a,cf_b",
       "--gather-output", "0", "--packed-x2", "1"},
      {"alltoall-quant-matmul", "--bs", "64", "--h", "6", "--combo", "a4w4", "--dtype", "float16"},
      {"quant-reduce-scatter", "--scales", "mx", "--dtype", "float8_e5m2", "--out-dtype",
       "bfloat16", "-b", "8K", "-e", "8K"},
  };
  for (const auto& in : inputs) {
    BenchOptions a = parse_bench_options(in);
    a.port = 12345;
    const BenchOptions b = parse_bench_options(to_args(a), /*internal=*/true);
    EXPECT_EQ(b.op, a.op);
    EXPECT_EQ(b.family, a.family);
    EXPECT_EQ(b.nprocs, a.nprocs);
    EXPECT_EQ(b.min_bytes, a.min_bytes);
    EXPECT_EQ(b.max_bytes, a.max_bytes);
    EXPECT_EQ(b.factor, a.factor);
    EXPECT_EQ(b.dtype, a.dtype);
    EXPECT_EQ(b.transport, a.transport);
    EXPECT_EQ(b.iters, a.iters);
    EXPECT_EQ(b.warmup, a.warmup);
    EXPECT_EQ(b.rounds, a.rounds);
    EXPECT_EQ(b.json, a.json);
    EXPECT_EQ(b.trace, a.trace);
    EXPECT_EQ(b.netns, a.netns);
    EXPECT_EQ(b.port, 12345);
    EXPECT_EQ(b.m, a.m);
    EXPECT_EQ(b.k, a.k);
    EXPECT_EQ(b.n, a.n);
    EXPECT_EQ(b.comm_turn, a.comm_turn);
    EXPECT_EQ(b.gather_output, a.gather_output);
    EXPECT_EQ(b.packed_x2, a.packed_x2);
    EXPECT_EQ(b.bs, a.bs);
    EXPECT_EQ(b.h, a.h);
    EXPECT_EQ(b.combo, a.combo);
    EXPECT_EQ(b.scales, a.scales);
    EXPECT_EQ(b.out_dtype, a.out_dtype);
  }
  EXPECT_EQ(parse_bench_options(inputs[2]).gather_output, 0);
  EXPECT_EQ(parse_bench_options(inputs[1]).gather_output, 1);  // the default
  const BenchOptions g = parse_bench_options(inputs[0]);
  EXPECT_EQ(g.min_bytes, 1536u);
  EXPECT_EQ(g.max_bytes, 3u << 20);
  EXPECT_EQ(g.iters, 7);
  EXPECT_EQ(g.json, "out.json");
}

TEST(CliArgs, NetnsNamesEachRanksNamespace) {
  const BenchOptions o =
      parse_bench_options({"all-reduce", "--transport", "mpi", "--netns", "cfa,cfb"});
  EXPECT_EQ(o.netns, (std::vector<std::string>{"cfa", "cfb"}));
  EXPECT_TRUE(parse_bench_options({"all-reduce"}).netns.empty());
  EXPECT_EQ(usage_error([] {
              parse_bench_options({"all-reduce", "--netns", "cfa,cfb"});
            }),
            "--netns needs --transport mpi (shared memory does not cross a network)");
  for (const char* bad : {"", "a,", ",a", "a,,b", "a b", "../x", "a/b", "..", "a;b"})
    EXPECT_EQ(usage_error([&] {
                parse_bench_options({"all-reduce", "--transport", "mpi", "--netns", bad});
              }),
              std::string("--netns '") + bad +
                  "': each namespace name is letters, digits, '_', '.' or '-'")
        << "'" << bad << "'";
}

// Shapes the workers could not run are usage errors (exit 2) naming the options: --m 0
// divided by zero in the float64 reference (SIGFPE / SIGSEGV in every worker); --k 2^62 ended
// through MPI_Abort with "cannot create std::vector larger than max_size()".
TEST(CliArgs, MatmulShapesTheWorkersCannotRunAreRefused) {
  EXPECT_EQ(usage_error([] {
              parse_bench_options({"all-gather-matmul", "--m", "0"});
            }),
            "--m: '0' must be at least 1");
  EXPECT_EQ(usage_error([] {
              parse_bench_options({"matmul-all-reduce", "--m", "2", "--k", "4611686018427387904",
                                   "--n", "4611686018427387904"});
            })
                .find("--m 2 --k 4611686018427387904 --n 4611686018427387904 -n 2: the matrices "
                      "take at least "),
            0u);
  // Past the host's memory (no 2-core host of this project has 64 TiB), alltoall's too.
  const std::string big = usage_error([] {
    parse_bench_options({"all-gather-matmul", "--k", "4194304", "--n", "4194304"});
  });
  EXPECT_NE(big.find("GiB of memory"), std::string::npos) << big;
  EXPECT_NE(usage_error([] {
              parse_bench_options({"alltoall-matmul", "--bs", "4194304", "--h", "4194304"});
            }).find("--bs 4194304 --h 4194304 --n 4096 -n 2: the matrices take at least"),
            std::string::npos);
  // The defaults fit.
  EXPECT_EQ(usage_error([] { parse_bench_options({"all-gather-matmul"}); }), "");
  EXPECT_EQ(usage_error([] { parse_bench_options({"alltoall-quant-matmul"}); }), "");
}

// Combinations a worker would refuse are usage errors in the parent (exit 2), not a worker's
// error through MPI_Abort (exit 1 and Open MPI's banner): an int4 x2 with an odd --n, and
// --packed-x2 1 where no PackedWeight exists (A4W4, 8-bit float weights).
TEST(CliArgs, CombinationsTheWorkersRefuseAreUsageErrors) {
  EXPECT_EQ(usage_error([] {
              parse_bench_options({"alltoall-quant-matmul", "--bs", "4", "--h", "64", "--n", "7",
                                   "--combo", "a16w4"});
            }),
            "--combo a16w4 needs an even --n (the int4 x2's rows hold two values a byte), not 7");
  EXPECT_NE(usage_error([] {
              parse_bench_options({"alltoall-quant-matmul", "--n", "3", "--combo", "a4w4"});
            }),
            "");
  EXPECT_EQ(usage_error([] {
              parse_bench_options({"alltoall-quant-matmul", "--n", "3", "--combo", "a16w8"});
            }),
            "");
  EXPECT_EQ(usage_error([] {
              parse_bench_options({"alltoall-quant-matmul", "--combo", "a4w4", "--packed-x2", "1"});
            }),
            "--packed-x2 1 takes --combo a16w8 or a16w4 (A4W4 has no PackedWeight)");
  for (const char* dtype : {"float8_e4m3fn", "float8_e5m2", "hifloat8"})
    EXPECT_NE(usage_error([&] {
                parse_bench_options({"all-gather-matmul", "--m", "64", "--k", "128", "--n", "64",
                                     "--dtype", dtype, "--packed-x2", "1"});
              }).find("--packed-x2 1 takes --dtype float32, float16, bfloat16 or int8"),
              std::string::npos)
        << dtype;
  EXPECT_EQ(usage_error([] {
              parse_bench_options({"all-gather-matmul", "--m", "64", "--k", "128", "--n", "64",
                                   "--dtype", "int8", "--packed-x2", "1"});
            }),
            "");
}

// The collectives' and quantized reductions' largest row against the host's memory (all-reduce
// -e 1024G ended every worker with std::bad_alloc through MPI_Abort).
TEST(CliArgs, SweepsPastTheHostsMemoryAreRefused) {
  const std::string big = usage_error([] {
    parse_bench_options({"all-reduce", "-b", "1024G", "-e", "1024G"});
  });
  EXPECT_EQ(big.find("-e 1099511627776 -n 2: the largest row takes at least 1.23e+04 GiB on this "
                     "host (source, results and their float32 values per rank), which has "),
            0u)
      << big;
  const std::string quant = usage_error([] {
    parse_bench_options({"quant-all-reduce", "-e", "1024G"});
  });
  EXPECT_EQ(quant.find("-e 1099511627776 -n 2: the largest row takes at least 2.66e+04 GiB"), 0u)
      << quant;
  EXPECT_EQ(usage_error([] { parse_bench_options({"all-gather", "-e", "64M"}); }), "");
  EXPECT_EQ(usage_error([] { parse_bench_options({"quant-reduce-scatter"}); }), "");
}

}  // namespace
}  // namespace commfuse::cli
