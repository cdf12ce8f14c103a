// `commfuse launch` end to end: the real CLI (COMMFUSE_CLI_PATH) starting real ranks, mostly
// `sh -c` one-liners. Ranks that should be stopped `exec sleep 30`, so that the signal reaches
// the sleeping process itself rather than a shell that would leave an orphaned sleep behind.
// The elapsed-time bounds are generous and prove that ranks were stopped, not waited for.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "subprocess.hpp"

namespace commfuse::test {
namespace {

const std::string kCli = COMMFUSE_CLI_PATH;

std::vector<std::string> launch(std::vector<std::string> args) {
  args.insert(args.begin(), {kCli, "launch"});
  return args;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A scratch directory for ranks to leave marks in, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "commfuse-launch-XXXXXX");
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Gone, or a zombie whose parent is not reaping it: either way no longer running.
bool process_dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' ||
         line[paren + 2] == 'X';
}

// Pids printed by ranks as "[rank r] <pid> ready".
std::vector<pid_t> ready_pids(const std::string& out) {
  std::vector<pid_t> pids;
  const std::regex re(R"(\[rank \d+\] (\d+) ready)");
  for (const auto& line : lines_of(out)) {
    std::smatch m;
    if (std::regex_match(line, m, re)) pids.push_back(std::stoi(m[1]));
  }
  return pids;
}

TEST(Launch, SetsTheEnvironmentOfEachRank) {
  const auto r = run(launch({"-n", "3", "--", "sh", "-c",
                             "echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE/"
                             "$MASTER_ADDR:$MASTER_PORT"}));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  const std::regex re(R"(\[rank (\d)\] (\d)/3/(\d)/3/127\.0\.0\.1:(\d+))");
  std::set<int> ranks;
  std::set<int> ports;
  for (const auto& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, re)) << line;
    EXPECT_EQ(m[1], m[2]) << line;  // the prefix names the rank whose RANK it printed
    EXPECT_EQ(m[2], m[3]) << line;  // LOCAL_RANK == RANK on one host
    ranks.insert(std::stoi(m[1]));
    ports.insert(std::stoi(m[4]));
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
  ASSERT_EQ(ports.size(), 1u) << r.out;
  EXPECT_GE(*ports.begin(), 1024);
  EXPECT_LE(*ports.begin(), 65535);
}

TEST(Launch, PortOverrideAndSingleRank) {
  const auto r = run(
      launch({"-n", "1", "--port", "23456", "sh", "-c", "echo $RANK/$WORLD_SIZE:$MASTER_PORT"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] 0/1:23456\n");
}

TEST(Launch, AllRanksSucceedExitsZero) {
  const auto r = run(launch({"-n", "4", "true"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

TEST(Launch, StdoutAndStderrStaySeparate) {
  const auto r = run(launch({"-n", "2", "sh", "-c", "echo out$RANK; echo err$RANK >&2"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto out = lines_of(r.out), err = lines_of(r.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] out0", "[rank 1] out1"}));
  EXPECT_EQ(err, (std::vector<std::string>{"[rank 0] err0", "[rank 1] err1"}));
}

TEST(Launch, PartialLastLineIsPrefixed) {
  const auto r = run(launch({"-n", "1", "sh", "-c", "printf 'a\\nlast'; printf 'e' >&2"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] a\n[rank 0] last\n");
  EXPECT_EQ(r.err, "[rank 0] e\n");
}

// awk writes in 4 KiB blocks that cut lines anywhere; every line must still come out whole,
// in order, with its own rank's prefix.
TEST(Launch, LinesOfRanksNeverMix) {
  constexpr int kRanks = 4, kLines = 3000;
  const std::string pad(150, 'x');
  const auto r = run(launch({"-n", std::to_string(kRanks), "awk",
                             "BEGIN { for (i = 0; i < " + std::to_string(kLines) +
                                 "; i++) print ENVIRON[\"RANK\"] \":\" i \":" + pad + "\" }"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<int, int> next;
  const std::regex re(R"(\[rank (\d)\] (\d):(\d+):x+)");
  for (const auto& line : lines_of(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, re)) << line.substr(0, 200);
    ASSERT_EQ(m[1], m[2]);
    ASSERT_EQ(m[0].length(), line.size());
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[3]), next[rank]++) << "rank " << rank;
    ASSERT_EQ(line.size() - line.rfind(':') - 1, pad.size());
  }
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(next[rank], kLines) << "rank " << rank;
}

// `commfuse launch ... | head -n 1`: once head exits, the ranks must see a broken pipe, as they
// would writing to head directly, rather than run forever with their output discarded.
TEST(Launch, ClosedStdoutReachesTheRanks) {
  const auto r = run({"sh", "-c", kCli + " launch -n 2 yes | head -n 1"}, 30);
  ASSERT_FALSE(r.timed_out) << "the ranks kept running after the reader went away";
  EXPECT_TRUE(r.out == "[rank 0] y\n" || r.out == "[rank 1] y\n") << r.out;
}

TEST(Launch, NoPrefixPassesOutputThrough) {
  const auto r = run(launch({"-n", "2", "--no-prefix", "echo", "hi"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hi\nhi\n");
}

TEST(Launch, FailingRankStopsTheOthersAndSetsTheExitCode) {
  const auto r = run(launch({"-n", "4", "--grace", "1", "--", "sh", "-c",
                             "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 30"}));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("rank 1 (pid "), std::string::npos) << r.err;
  // The others get the grace period to exit on their own (they usually report the
  // failure themselves), then SIGTERM.
  EXPECT_NE(r.err.find("exited with code 3; waiting up to 1 s for the other 3 ranks to exit"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ranks 0,2,3 still running after the 1 s grace period; sending SIGTERM"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ranks 0,2,3: killed by signal 15 (SIGTERM)"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 20) << "the other ranks were waited for, not stopped";
}

TEST(Launch, OthersThatExitWithinTheGracePeriodAreNotSignalled) {
  const auto r = run(launch({"-n", "3", "--grace", "10", "--", "sh", "-c",
                             "if [ $RANK = 1 ]; then exit 5; fi; sleep 0.5; echo done"}));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("ranks 0,2: exited with code 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SIGTERM"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 8) << "the launcher waited out the grace period after everyone exited";
}

TEST(Launch, RankKilledBySignal) {
  const auto r = run(launch({"-n", "4", "--grace", "1", "--", "sh", "-c",
                             "if [ $RANK = 2 ]; then kill -9 $$; fi; exec sleep 30"}));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_NE(r.err.find("rank 2 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 20);
}

// Ranks 1 and 2 ignore SIGTERM (and say so with a file before rank 0 fails, or SIGTERM could
// arrive before the trap is set): they must be SIGKILLed once the grace period is over, the
// second one (--help: the grace before SIGTERM, and again before SIGKILL; it was 2 s).
TEST(Launch, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  TempDir dir;
  const std::string d = dir.path();
  const auto r = run(launch(
      {"-n", "3", "--grace", "2.5", "sh", "-c",
       "trap '' TERM; if [ $RANK = 0 ]; then while [ ! -e " + d + "/r1 ] || [ ! -e " + d +
           "/r2 ]; do sleep 0.02; done; exit 1; fi; touch " + d + "/r$RANK; exec sleep 30"}));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("ranks 1,2 still running after the 2.5 s grace period; sending SIGKILL"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ranks 1,2: killed by signal 9 (SIGKILL)"), std::string::npos) << r.err;
  EXPECT_GE(r.seconds, 4.9) << "SIGKILL came before two grace periods";
  EXPECT_LT(r.seconds, 20);
}

TEST(Launch, ExitedRanksAreReapedWhileOthersRun) {
  // Rank 1 watches rank 0's pid: once rank 0 exits, the launcher must reap it (its /proc
  // entry goes away) while rank 1 is still running.
  TempDir dir;
  const std::string f = dir.path() + "/pid0";
  const auto r = run(launch(
      {"-n", "2", "sh", "-c",
       "if [ $RANK = 0 ]; then echo $$ > " + f + ".tmp; mv " + f + ".tmp " + f +
           "; exit 0; fi; while [ ! -e " + f + " ]; do sleep 0.02; done; p=$(cat " + f +
           "); i=0; while [ -e /proc/$p ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; "
           "if [ -e /proc/$p ]; then echo rank 0 not reaped; exit 1; fi"}));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(Launch, ForwardsSigtermToTheRanks) {
  Subprocess launcher(launch({"-n", "3", "sh", "-c", "echo $$ ready; exec sleep 30"}));
  const auto pids = ready_pids(launcher.wait_for_stdout_lines(3, 20));
  ASSERT_EQ(pids.size(), 3u);
  ::kill(launcher.pid(), SIGTERM);
  const auto r = launcher.finish();
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("received signal 15 (SIGTERM); forwarding it to the 3 running ranks"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 20);
  for (pid_t pid : pids) EXPECT_TRUE(process_dead(pid)) << pid;
}

// A rank's own child that ignores SIGINT (as `&` makes it in sh) outlived the launch: the
// launcher signalled the rank alone. It is ended with the launch now.
TEST(Launch, WhatARankStartedEndsWithAStoppedLaunch) {
  TempDir dir;
  const std::string d = dir.path();
  Subprocess launcher(launch({"-n", "2", "--grace", "1", "sh", "-c",
                              "sleep 30 & echo $! > " + d + "/c$RANK; echo $$ ready; wait"}));
  const auto pids = ready_pids(launcher.wait_for_stdout_lines(2, 20));
  ASSERT_EQ(pids.size(), 2u);
  ::kill(launcher.pid(), SIGINT);
  const auto r = launcher.finish();
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream f(d + "/c" + std::to_string(rank));
    pid_t child = 0;
    ASSERT_TRUE(f >> child) << "rank " << rank << " wrote no child pid";
    EXPECT_TRUE(process_dead(child)) << "rank " << rank << "'s child " << child << " outlived it";
  }
}

// A rank's child that outlives its parent shell is adopted by the launcher (its subreaper) and
// reaped when it exits, not left a zombie while the launch goes on.
TEST(Launch, AnAdoptedOrphanIsReapedWhenItExits) {
  TempDir dir;
  const std::string f = dir.path() + "/orphan";
  const auto r = run(launch(
      {"-n", "1", "sh", "-c",
       "sh -c 'sleep 0.3 & echo $! > " + f + ".tmp; mv " + f + ".tmp " + f + "' ; while [ ! -e " +
           f + " ]; do sleep 0.02; done; p=$(cat " + f +
           "); i=0; while [ $i -lt 250 ] && [ -e /proc/$p ]; do sleep 0.02; i=$((i+1)); done; "
           "if [ -e /proc/$p ]; then echo \"orphan $p: $(cut -d' ' -f3 /proc/$p/stat)\"; "
           "exit 1; fi"}));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(Launch, RanksDieWithTheLauncher) {
  Subprocess launcher(launch({"-n", "3", "sh", "-c", "echo $$ ready; exec sleep 30"}));
  const auto pids = ready_pids(launcher.wait_for_stdout_lines(3, 20));
  ASSERT_EQ(pids.size(), 3u);
  ::kill(launcher.pid(), SIGKILL);  // no chance to clean up: PR_SET_PDEATHSIG must do it
  EXPECT_EQ(launcher.finish().exit_code, 128 + SIGKILL);
  for (pid_t pid : pids) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!process_dead(pid) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(process_dead(pid)) << pid;
  }
}

TEST(Launch, ProgramThatCannotBeExecuted) {
  const auto r = run(launch({"-n", "2", "commfuse-no-such-program"}));
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("rank 0: cannot execute 'commfuse-no-such-program': No such file or "
                       "directory"),
            std::string::npos)
      << r.err;
}

TEST(Launch, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"true"},               // no -n
      {"-n", "0", "true"},    // W < 1
      {"-n", "two", "true"},  // not a number
      {"-n", "2"},            // no program
      {"-n", "2", "--"},      // no program after --
      {"-n"},                 // -n without a value
      {"-n", "2", "--bogus", "true"},
      {"-n", "2", "--grace", "-1", "true"},
      {"-n", "2", "--port", "70000", "true"},
      {"-n", "2147483647", "true"},  // was std::bad_alloc, SIGABRT
      {"-n", "65537", "true"},
  };
  for (const auto& args : bad) {
    const auto r = run(launch(args));
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined;
    EXPECT_NE(r.err.find("usage: commfuse launch"), std::string::npos) << joined << r.err;
    EXPECT_EQ(r.out, "") << joined;
  }
}

TEST(Launch, OptionForms) {
  const auto r = run(
      launch({"-n2", "--grace=0.5", "--port=23457", "sh", "-c", "echo $WORLD_SIZE:$MASTER_PORT"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto lines = lines_of(r.out);
  std::sort(lines.begin(), lines.end());  // ranks run concurrently: any order
  EXPECT_EQ(lines, (std::vector<std::string>{"[rank 0] 2:23457", "[rank 1] 2:23457"}));
  const auto r2 = run(launch({"--nprocs", "1", "echo", "-n", "x"}));  // -n goes to echo
  EXPECT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(r2.out, "[rank 0] x\n");
}

TEST(Launch, Help) {
  const auto r = run(launch({"--help"}));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("usage: commfuse launch"), std::string::npos);
}

}  // namespace
}  // namespace commfuse::test
