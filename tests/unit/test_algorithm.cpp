// Algorithm lists (core/algorithm.hpp): COMMFUSE_ALGO parsing, forcing, rejection of
// names an op does not have or that do not apply, and the default choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include "core/algorithm.hpp"
#include "core/error.hpp"

using commfuse::AlgorithmEntry;
using commfuse::choose_algorithm;
using commfuse::forced_algorithm;

namespace {

// Sets COMMFUSE_ALGO for one test (params are read from the environment on every call).
struct AlgoEnv {
  explicit AlgoEnv(const char* v) {
    const char* old = std::getenv("COMMFUSE_ALGO");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("COMMFUSE_ALGO", v, 1);
  }
  ~AlgoEnv() {
    if (had_)
      setenv("COMMFUSE_ALGO", old_.c_str(), 1);
    else
      unsetenv("COMMFUSE_ALGO");
  }
  bool had_ = false;
  std::string old_;
};

std::string kWhatText() {
  return "op_x m=1";
}
const std::function<std::string()> kWhat = kWhatText;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const commfuse::Error& e) {
    EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace

TEST(Algorithm, ForcedNamesPerOp) {
  AlgoEnv env("all_gather_matmul:unfused,matmul_all_reduce:fused");
  EXPECT_EQ(forced_algorithm("all_gather_matmul"), "unfused");
  EXPECT_EQ(forced_algorithm("matmul_all_reduce"), "fused");
  EXPECT_EQ(forced_algorithm("matmul_reduce_scatter"), "");
}

TEST(Algorithm, MalformedValueNamesTheVariable) {
  AlgoEnv env("all_gather_matmul");
  const std::string m = message_of([] { forced_algorithm("all_gather_matmul"); });
  EXPECT_NE(m.find("COMMFUSE_ALGO"), std::string::npos) << m;
  EXPECT_NE(m.find("<op>:<algorithm>"), std::string::npos) << m;
}

// Checked where a communicator is created: an op without an algorithm list (a typo was
// silently ignored, running the default) and one op forced to two names are refused.
TEST(Algorithm, TheWholeValueIsCheckedForUnknownOpsAndContradictions) {
  {
    AlgoEnv env("allreduce:two_shot");
    const std::string m = message_of([] { commfuse::check_forced_algorithms(); });
    EXPECT_NE(m.find("COMMFUSE_ALGO='allreduce:two_shot': 'allreduce' is not an op with "
                     "algorithms (all_gather, all_to_all, broadcast, all_reduce,"),
              std::string::npos)
        << m;
  }
  {
    AlgoEnv env("all_reduce:two_shot,all_gather:cma,all_reduce:one_shot");
    const std::string m = message_of([] { commfuse::check_forced_algorithms(); });
    EXPECT_NE(m.find("forces all_reduce twice, to two_shot and to one_shot"), std::string::npos)
        << m;
  }
  {
    AlgoEnv env("all_reduce:two_shot,,all_reduce:two_shot,all_gather_matmul:unfused");
    EXPECT_NO_THROW(commfuse::check_forced_algorithms());
  }
  for (const std::string_view op : commfuse::algorithm_ops()) {
    AlgoEnv env((std::string(op) + ":x").c_str());
    EXPECT_NO_THROW(commfuse::check_forced_algorithms()) << op;
  }
}

TEST(Algorithm, NotPreferredIsSkippedButMayBeForced) {
  const std::vector<AlgorithmEntry> list{
      {"two_phase", "", "fewer than 4 ranks"}, {"one_pass", ""}, {"unfused", ""}};
  {
    AlgoEnv env("");
    EXPECT_EQ(choose_algorithm("op_x", kWhat, list), 1u);
  }
  {
    AlgoEnv env("op_x:two_phase");
    EXPECT_EQ(choose_algorithm("op_x", kWhat, list), 0u);
  }
  // Nothing preferred: the first that applies.
  const std::vector<AlgorithmEntry> none{{"a", "", "slow"}, {"b", "", "slower"}};
  AlgoEnv env("");
  EXPECT_EQ(choose_algorithm("op_x", kWhat, none), 0u);
}

TEST(Algorithm, FirstApplicableUnlessForced) {
  const std::vector<AlgorithmEntry> list{{"fast", "needs shm"}, {"fused", ""}, {"unfused", ""}};
  {
    AlgoEnv env("");
    EXPECT_EQ(choose_algorithm("op_x", kWhat, list), 1u);
  }
  {
    AlgoEnv env("op_x:unfused");
    EXPECT_EQ(choose_algorithm("op_x", kWhat, list), 2u);
  }
  {
    AlgoEnv env("op_y:unfused");  // another op's setting
    EXPECT_EQ(choose_algorithm("op_x", kWhat, list), 1u);
  }
  {
    AlgoEnv env("op_x:fast");
    const std::string m = message_of([&] { choose_algorithm("op_x", kWhat, list); });
    EXPECT_NE(m.find("does not apply to op_x m=1: needs shm"), std::string::npos) << m;
  }
  {
    AlgoEnv env("op_x:ring");
    const std::string m = message_of([&] { choose_algorithm("op_x", kWhat, list); });
    EXPECT_NE(m.find("no algorithm 'ring' (fast|fused|unfused)"), std::string::npos) << m;
    EXPECT_NE(m.find("COMMFUSE_ALGO"), std::string::npos) << m;  // names the variable to fix
  }
}
