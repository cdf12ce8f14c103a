// The `commfuse` binary (COMMFUSE_CLI_PATH) as a new user meets it: every command's --help,
// the bench list, --version, and strict option values. The benchmark names come from the
// same table the binary uses (bench_catalog.cpp), cross-checked against a list written here.
// Nothing here runs a benchmark: every bench command below must stop at its arguments, or
// (one case) at its workers' communicator creation.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_catalog.hpp"
#include "subprocess.hpp"

namespace commfuse::test {
namespace {

const std::string kCli = COMMFUSE_CLI_PATH;

RunResult cli(std::vector<std::string> args) {
  args.insert(args.begin(), kCli);
  return run(args);
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += a + " ";
  return s;
}

// " name ": a name as a word of the help text. (Built with +=, which also keeps GCC 12's
// -Wrestrict false positive on " " + std::string(x) + " " away.)
std::string word(std::string_view name, const char* before = " ") {
  std::string w = before;
  w += name;
  w += ' ';
  return w;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Cli, TheBenchmarkTableHasEveryBenchmark) {
  const std::set<std::string> expected = {
      "all-reduce",           "all-gather",
      "reduce-scatter",       "all-to-all",
      "all-gather-matmul",    "matmul-reduce-scatter",
      "matmul-all-reduce",    "alltoall-quant-matmul",
      "alltoall-matmul",      "quant-all-reduce",
      "quant-reduce-scatter",
  };
  std::set<std::string> table;
  for (const auto& b : cli::bench_catalog()) table.insert(std::string(b.name));
  EXPECT_EQ(table, expected);
}

TEST(Cli, BenchHelpListsEveryBenchmarkAndOption) {
  for (const char* help : {"--help", "-h"}) {
    const auto r = cli({"bench", help});
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 0) << help << r.err;
    EXPECT_TRUE(contains(r.out, "usage: commfuse bench")) << r.out;
    for (const auto& b : cli::bench_catalog())
      EXPECT_TRUE(contains(r.out, word(b.name, "  "))) << b.name << "\n" << r.out;
    for (const auto& o : cli::bench_option_specs())
      EXPECT_EQ(contains(r.out, word(o.long_name)), !o.help.empty()) << o.long_name << "\n"
                                                                     << r.out;
  }
}

TEST(Cli, BenchWithoutArgumentsPrintsTheListAsAUsageError) {
  const auto r = cli({"bench"});
  EXPECT_EQ(r.exit_code, 2);  // like `commfuse` alone
  EXPECT_EQ(r.out, "");
  for (const auto& b : cli::bench_catalog())
    EXPECT_TRUE(contains(r.err, word(b.name, "  "))) << b.name << "\n" << r.err;
}

TEST(Cli, EachBenchmarkHasItsOwnHelp) {
  for (const auto& b : cli::bench_catalog()) {
    const std::string name(b.name);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"bench", name, "--help"},
          std::vector<std::string>{"bench", name, "-n", "2", "-h"}}) {
      const auto r = cli(args);
      EXPECT_EQ(r.exit_code, 0) << joined(args) << r.err;
      EXPECT_TRUE(contains(r.out, "usage: commfuse bench " + name + " [options]"))
          << joined(args) << r.out;
      EXPECT_FALSE(contains(r.out, "# commfuse bench")) << "it ran: " << r.out;
      // An option may have a row per family (--dtype): listed if any of its rows applies.
      std::set<std::string> applies, all;
      for (const auto& o : cli::bench_option_specs()) {
        if (o.help.empty()) continue;
        all.insert(std::string(o.long_name));
        if (o.families & b.family) applies.insert(std::string(o.long_name));
      }
      for (const auto& o : all)
        EXPECT_EQ(contains(r.out, word(o)), applies.count(o) == 1) << name << " " << o;
    }
  }
}

TEST(Cli, EveryCommandHasHelp) {
  for (const char* command : {"info", "demo", "selfcheck", "launch", "bench", "version"}) {
    for (const char* help : {"--help", "-h"}) {
      const auto r = cli({command, help});
      ASSERT_FALSE(r.timed_out) << command;
      EXPECT_EQ(r.exit_code, 0) << command << " " << help << r.err;
      EXPECT_TRUE(contains(r.out, std::string("usage: commfuse ") + command))
          << command << " " << help << ": " << r.out;
      EXPECT_EQ(r.err, "") << command;
      // Only the usage: demo and selfcheck print their check table when they run.
      EXPECT_FALSE(contains(r.out, "PASS")) << command << " ran: " << r.out;
    }
  }
  const auto r = cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "usage: commfuse <command>")) << r.out;
}

TEST(Cli, CommandsWithoutOptionsRejectArguments) {
  for (const char* command : {"info", "demo", "selfcheck", "version"}) {
    const auto r = cli({command, "--bogus"});
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_TRUE(contains(r.err, "'--bogus'")) << command << ": " << r.err;
    EXPECT_EQ(r.out, "") << command;
  }
}

TEST(Cli, Version) {
  const std::string expected = "commfuse " + std::string(commfuse::version()) + "\n";
  for (const char* form : {"--version", "version"}) {
    const auto r = cli({form});
    EXPECT_EQ(r.exit_code, 0) << form;
    EXPECT_EQ(r.out, expected) << form;
  }
}

// A bad value must stop the command with a usage error (2) that names the option and the
// value as given, before anything runs.
// COMMFUSE_INT8_GEMM pins the exact int8 path where oneDNN's s8 kernel saturates (the avx2
// cap has no VNNI): `commfuse info` names the pinned path; madd16 under the sse41 cap is an
// error naming the variable.
TEST(Cli, Int8GemmPinShowsInInfo) {
  const std::string env = "/usr/bin/env";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"f32-blocked", "for int8 (no VNNI/AMX): exact f32 blocks"},
      {"madd16", "for int8 (no VNNI/AMX): avx2-madd16"}};
  for (const auto& [pin, want] : cases) {
    const RunResult r =
        run({env, "COMMFUSE_MAX_CPU_ISA=avx2", "COMMFUSE_INT8_GEMM=" + pin, kCli, "info"});
    EXPECT_EQ(r.exit_code, 0) << pin << ": " << r.out << r.err;
    EXPECT_TRUE(contains(r.out, want)) << pin << ": " << r.out << r.err;
  }
  const RunResult r =
      run({env, "COMMFUSE_MAX_CPU_ISA=sse41", "COMMFUSE_INT8_GEMM=madd16", kCli, "info"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "COMMFUSE_INT8_GEMM=madd16 needs AVX2")) << r.out << r.err;
}

TEST(Cli, BadValuesAreUsageErrorsNamingOptionAndValue) {
  struct Case {
    std::vector<std::string> args;
    std::string option, value;
  };
  const std::vector<Case> cases = {
      {{"bench", "all-reduce", "--iters", "abc"}, "--iters", "abc"},
      {{"bench", "all-reduce", "--iters=abc"}, "--iters", "abc"},
      {{"bench", "all-reduce", "--iters", "99999999999999999999"},
       "--iters",
       "99999999999999999999"},
      {{"bench", "all-reduce", "--warmup", "-1"}, "--warmup", "-1"},
      {{"bench", "all-reduce", "--rounds", "0"}, "--rounds", "0"},
      {{"bench", "all-reduce", "-b", "4Q"}, "-b", "4Q"},
      {{"bench", "all-reduce", "-e", "64MB"}, "-e", "64MB"},
      {{"bench", "all-reduce", "-b", "0"}, "-b", "0"},
      {{"bench", "all-reduce", "-b", "4K4"}, "-b", "4K4"},
      {{"bench", "all-reduce", "-f", "1"}, "-f", "1"},
      {{"bench", "all-reduce", "-f", "2x"}, "-f", "2x"},
      {{"bench", "all-reduce", "-n", "x"}, "-n", "x"},
      {{"bench", "all-reduce", "-n", "2.5"}, "-n", "2.5"},
      {{"bench", "all-reduce", "-n0"}, "-n", "0"},
      {{"bench", "all-reduce", "--nprocs", "257"}, "--nprocs", "257"},
      {{"bench", "all-reduce", "--dtype", "float33"}, "--dtype", "float33"},
      {{"bench", "all-reduce", "--transport", "tcp"}, "--transport", "tcp"},
      {{"bench", "all-gather-matmul", "--m", "1k"}, "--m", "1k"},
      {{"bench", "all-gather-matmul", "--comm-turn", "65"}, "--comm-turn", "65"},
      {{"bench", "all-gather-matmul", "--gather-output", "2"}, "--gather-output", "2"},
      {{"bench", "matmul-all-reduce", "--k", ""}, "--k", ""},
      {{"bench", "alltoall-quant-matmul", "--bs", "12abc"}, "--bs", "12abc"},
      {{"bench", "alltoall-quant-matmul", "--combo", "a8w8"}, "--combo", "a8w8"},
      {{"bench", "alltoall-matmul", "--h", "-5"}, "--h", "-5"},
      {{"bench", "quant-all-reduce", "-b", "1.5.5K"}, "-b", "1.5.5K"},
      {{"bench", "quant-reduce-scatter", "--scales", "per_token"}, "--scales", "per_token"},
      {{"launch", "-n", "x", "true"}, "-n", "x"},
      {{"launch", "-n", "2x", "true"}, "-n", "2x"},
      {{"launch", "--grace", "soon", "-n", "2", "true"}, "--grace", "soon"},
      {{"launch", "--grace", "1e308", "-n", "2", "true"}, "--grace", "1e308"},
  };
  for (const auto& c : cases) {
    const auto r = cli(c.args);
    ASSERT_FALSE(r.timed_out) << joined(c.args);
    EXPECT_EQ(r.exit_code, 2) << joined(c.args) << r.err;
    EXPECT_TRUE(contains(r.err, c.option + ": '" + c.value + "'")) << joined(c.args) << r.err;
    EXPECT_EQ(r.out, "") << joined(c.args);
  }
}

// info marks INVALID what communicator creation refuses (comm_create.cpp, check_comm_params),
// not only the values of the wrong kind: it had shown these as they were.
TEST(Cli, InfoMarksEveryValueCreationRefuses) {
  const std::string env = "/usr/bin/env";
  const RunResult r =
      run({env, "COMMFUSE_ALGO=allreduce:two_shot", "COMMFUSE_VERBOSE=3", "COMMFUSE_TIMEOUT_S=abc",
           "COMMFUSE_TRACE=/proc/nonexistent/t.json", kCli, "info"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* want :
       {"INVALID: COMMFUSE_ALGO='allreduce:two_shot': 'allreduce' is not an op with algorithms",
        "INVALID: COMMFUSE_VERBOSE=3 must be in [0, 2]",
        "INVALID: COMMFUSE_TIMEOUT_S='abc' is not a non-negative integer",
        "INVALID: COMMFUSE_TRACE='/proc/nonexistent/t.json' cannot be written: No such file "
        "or directory"})
    EXPECT_TRUE(contains(r.out, want)) << want << "\n" << r.out;
}

// Checked before any worker starts: an unwritable --json had ended the workers through
// MPI_Abort after the run began; a sweep past the host's memory in std::bad_alloc. (One
// case below starts workers, which fail at once.)
TEST(Cli, BenchRefusesWhatItsWorkersCouldNotDo) {
  const auto json = cli({"bench", "all-reduce", "--json", "/proc/nonexistent/out.json"});
  EXPECT_EQ(json.exit_code, 2) << json.err;
  EXPECT_TRUE(contains(json.err,
                       "--json: cannot write '/proc/nonexistent/out.json': No such "
                       "file or directory"))
      << json.err;
  const auto big = cli({"bench", "all-reduce", "-b", "1024G", "-e", "1024G"});
  EXPECT_EQ(big.exit_code, 2) << big.err;
  EXPECT_TRUE(contains(big.err, "-e 1099511627776 -n 2: the largest row takes at least"))
      << big.err;
  EXPECT_EQ(json.out + big.out, "");
  // An existing file is checked without being emptied (a failed run had left it at 0 bytes).
  const std::string kept = testing::TempDir() + "commfuse_bench_kept.json";
  FILE* f = std::fopen(kept.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"old\": 1}\n", f);
  std::fclose(f);
  // Rank 1 exits in its first all_reduce, before rank 0 has a row (rank 0 had emptied the
  // file when its communicator was made).
  const auto failed =
      run({"/usr/bin/env", "COMMFUSE_FAULT=1:all_reduce:0:exit", kCli, "bench", "all-reduce",
           "--json", kept, "-e", "4K", "--iters", "1", "--rounds", "1"});
  EXPECT_NE(failed.exit_code, 0) << failed.err;
  EXPECT_TRUE(contains(failed.err, "COMMFUSE_FAULT: rank 1 exits with code 3")) << failed.err;
  f = std::fopen(kept.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[64] = {};
  EXPECT_NE(std::fgets(line, sizeof line, f), nullptr);
  std::fclose(f);
  std::remove(kept.c_str());
  EXPECT_EQ(std::string(line), "{\"old\": 1}\n");
  // Refused before anything starts, leaving nothing: a dangling link (its target had been
  // made and the link removed), a FIFO (rank 0, or every rank's tracer, blocked opening it),
  // --json and --trace on one file, also when new and spelled two ways (rows and events
  // mixed), a --trace that cannot be written (exit 1, and the session directory left).
  const std::string dir = testing::TempDir() + "commfuse_bench_paths";
  for (const char* f : {"/link.json", "/fifo", "/a.json", "/hard.json"})
    std::remove((dir + f).c_str());
  std::remove(dir.c_str());
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(symlink((dir + "/missing/target.json").c_str(), (dir + "/link.json").c_str()), 0);
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0644), 0);
  FILE* a = std::fopen((dir + "/a.json").c_str(), "w");
  ASSERT_NE(a, nullptr);
  std::fclose(a);
  ASSERT_EQ(link((dir + "/a.json").c_str(), (dir + "/hard.json").c_str()), 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> refusals = {
      {{"--json", dir + "/link.json"}, "is a symbolic link to a missing file"},
      {{"--json", dir + "/fifo"}, "is a FIFO, not a file"},
      {{"--trace", dir + "/fifo"}, "is a FIFO, not a file"},
      {{"--json", dir + "/same.json", "--trace", dir + "/same.json"}, "name the same file"},
      {{"--json", dir + "/same.json", "--trace", dir + "/./same.json"}, "name the same file"},
      // relative and new: weakly_canonical had left the first as it was
      {{"--json", "commfuse_same_rel.json", "--trace", "./commfuse_same_rel.json"},
       "name the same file"},
      {{"--json", dir + "/a.json", "--trace", dir + "/hard.json"}, "name the same file"},
      {{"--trace", dir + "/missing/t.json"}, "--trace: cannot write '" + dir + "/missing/t.json'"},
  };
  for (const auto& [extra, want] : refusals) {
    std::vector<std::string> args = {"bench", "all-reduce", "-e", "4K"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = cli(args);
    EXPECT_EQ(r.exit_code, 2) << joined(args) << r.err;
    EXPECT_TRUE(contains(r.err, want)) << joined(args) << r.err;
  }
  struct stat st {};
  EXPECT_EQ(lstat((dir + "/link.json").c_str(), &st), 0) << "the link was removed";
  EXPECT_NE(stat((dir + "/missing").c_str(), &st), 0) << "the link's target was made";
  EXPECT_NE(stat((dir + "/same.json").c_str(), &st), 0);
  EXPECT_NE(stat("commfuse_same_rel.json", &st), 0);
  for (const char* f : {"/link.json", "/fifo", "/a.json", "/hard.json"})
    std::remove((dir + f).c_str());
  std::remove(dir.c_str());
  // A sink for both is not one file mixing two outputs: not refused (the run's own exit code
  // is not asserted: under ASan its workers report OpenMPI's leaks and exit 1).
  const auto sink = cli({"bench", "all-reduce", "-e", "4K", "--iters", "1", "--rounds", "1",
                         "--json", "/dev/null", "--trace", "/dev/null"});
  EXPECT_NE(sink.exit_code, 2) << sink.err;
  EXPECT_FALSE(contains(sink.err, "name the same file")) << sink.err;
  // A row that cannot be written fails the run, naming why (it had vanished: exit 0).
  const auto full = cli(
      {"bench", "all-reduce", "-e", "4K", "--iters", "1", "--rounds", "1", "--json", "/dev/full"});
  EXPECT_NE(full.exit_code, 0) << full.err;
  EXPECT_TRUE(contains(full.err, "writing --json file /dev/full failed: No space left on device"))
      << full.err;
}

TEST(Cli, UnknownOptionsAndMisplacedOnesAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"bench", "all-reduce", "--bogus", "1"}, "unknown option '--bogus'"},
      {{"bench", "all-reduce", "--port", "5000"}, "unknown option '--port'"},  // internal
      {{"bench", "all-reduce", "--m", "64"}, "--m is not an option of all-reduce"},
      {{"bench", "all-gather-matmul", "-b", "4K"}, "-b is not an option of all-gather-matmul"},
      {{"bench", "all-reduce", "extra"}, "unexpected argument 'extra'"},
      {{"bench", "all-reduce", "--iters"}, "--iters needs a value"},
      {{"bench", "no-such-bench"}, "unknown benchmark 'no-such-bench'"},
      {{"bench", "all-reduce", "-b", "8K", "-e", "4K"}, "-b 8192 is larger than -e 4096"},
      // An F barely above 1 repeated one size without end (1K..2K by 1.0001: ~6900 rows).
      {{"bench", "all-reduce", "-b", "1K", "-e", "2K", "-f", "1.0001"},
       "-f 1.0001 makes more than 1000 sizes from -b 1024 to -e 2048 (take a larger F)"},
      // Refused here, not by every worker after mpirun started them (exit 1, MPI noise).
      {{"bench", "all-reduce", "--dtype", "hifloat8"},
       "--dtype hifloat8 cannot be summed by all-reduce (only float32, float16, bfloat16, int8, "
       "int32)"},
      {{"bench", "all-gather", "--dtype", "bool"},
       "--dtype bool: the benchmark converts its inputs from float32, and convert has no rules"},
      {{"bench", "quant-all-reduce", "-b", "4K", "-e", "1G", "-f", "1.01"},
       "-f 1.01 makes more than 1000 sizes from -b 4096 to -e 1073741824"},
      {{"bench", "all-gather-matmul", "-n", "3", "--m", "64"}, "--m 64 is not a multiple of -n 3"},
      {{"bench", "matmul-reduce-scatter", "--gather-output", "0"},
       "--gather-output 0 is for all-gather-matmul only"},
      {{"launch", "--bogus", "-n", "2", "true"}, "unknown option '--bogus'"},
  };
  for (const auto& c : cases) {
    const auto r = cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << joined(c.args) << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << joined(c.args) << r.err;
    EXPECT_EQ(r.out, "") << joined(c.args);
  }
}

}  // namespace
}  // namespace commfuse::test
