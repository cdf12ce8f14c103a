#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "core/params.hpp"

namespace params = commfuse::params;

namespace {
// Sets an environment variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* key, const char* value) : key_(key) {
    if (const char* old = std::getenv(key)) old_ = old, had_ = true;
    setenv(key, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(key_.c_str(), old_.c_str(), 1);
    else
      unsetenv(key_.c_str());
  }

 private:
  std::string key_, old_;
  bool had_ = false;
};
}  // namespace

TEST(Params, TableHasTheDocumentedKeysWithDescriptions) {
  std::set<std::string> keys;
  for (const auto& p : params::all()) {
    keys.insert(std::string(p.env));
    EXPECT_FALSE(p.description.empty()) << p.env;
    EXPECT_EQ(p.env.substr(0, 9), "COMMFUSE_");
  }
  for (const char* k :
       {"COMMFUSE_LOG", "COMMFUSE_TIMEOUT_S", "COMMFUSE_NUM_THREADS", "COMMFUSE_TRACE"})
    EXPECT_TRUE(keys.count(k)) << k;
}

TEST(Params, DefaultsAndOverrides) {
  unsetenv("COMMFUSE_TIMEOUT_S");
  EXPECT_EQ(params::timeout_seconds(), 300);
  ScopedEnv env("COMMFUSE_TIMEOUT_S", "7");
  EXPECT_EQ(params::timeout_seconds(), 7);
}

TEST(Params, InvalidValuesNameTheVariable) {
  {
    ScopedEnv env("COMMFUSE_TIMEOUT_S", "soon");
    try {
      params::timeout_seconds();
      FAIL();
    } catch (const commfuse::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("COMMFUSE_TIMEOUT_S='soon'"), std::string::npos);
    }
  }
  {
    ScopedEnv env("COMMFUSE_TIMEOUT_S", "0");
    EXPECT_THROW(params::timeout_seconds(), commfuse::InvalidArgument);
  }
  // Digits only, as "5 " was refused: strtoll had let " 5" and "+5" through.
  for (const char* v : {" 5", "+5", "5 ", "-0", ""}) {
    ScopedEnv env("COMMFUSE_TIMEOUT_S", v);
    EXPECT_THROW(params::get_int("COMMFUSE_TIMEOUT_S"), commfuse::InvalidArgument)
        << "'" << v << "'";
  }
  {
    ScopedEnv env("COMMFUSE_TRANSPORT", "carrier-pigeon");
    try {
      params::get_string("COMMFUSE_TRANSPORT");
      FAIL();
    } catch (const commfuse::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("auto|shm|mpi"), std::string::npos) << e.what();
    }
  }
}

TEST(Log, PrefixIsHostPidRank) {
  commfuse::log::set_rank(5);
  const std::string p = commfuse::log::prefix();
  const auto first = p.find(':');
  const auto last = p.rfind(':');
  ASSERT_NE(first, last);
  EXPECT_EQ(p.substr(last + 1), "5");
  EXPECT_EQ(p.substr(first + 1, last - first - 1), std::to_string(getpid()));
}

// The ranges live in the table (they had been four hand-written checks, one per reader): each
// integer's default is allowed, and a value past either end or off its multiple is refused
// by get_int and check, naming the variable and the range `commfuse info` shows.
TEST(Params, EveryIntegerIsCheckedAgainstItsTableRange) {
  int ranged = 0;
  for (const auto& p : params::all()) {
    if (p.kind != params::Kind::kInt) continue;
    const std::string env(p.env);
    unsetenv(env.c_str());
    EXPECT_NO_THROW(params::check(p.env)) << env;
    const int64_t def = params::get_int(p.env);
    EXPECT_TRUE(def >= p.min && def <= p.max && def % p.multiple == 0) << env;
    const std::string range = params::range_text(p);
    if (range.empty()) continue;
    ++ranged;
    std::vector<int64_t> bad;
    if (p.min > 0) bad.push_back(p.min - 1);
    if (p.max < std::numeric_limits<int64_t>::max()) bad.push_back(p.max + 1);
    if (p.multiple > 1) bad.push_back(p.min + 1);
    for (const int64_t v : bad) {
      ScopedEnv e(env.c_str(), std::to_string(v).c_str());
      try {
        params::check(p.env);
        ADD_FAILURE() << env << "=" << v << " was accepted";
      } catch (const commfuse::InvalidArgument& err) {
        EXPECT_NE(std::string(err.what()).find(env + "=" + std::to_string(v) + " must be " + range),
                  std::string::npos)
            << err.what();
      }
    }
  }
  EXPECT_GE(ranged, 4);  // TIMEOUT_S, NUM_THREADS, SHM_SLOT_BYTES, VERBOSE
  {                      // digits past 2^63 - 1: out of range, not "not an integer"
    ScopedEnv huge("COMMFUSE_TIMEOUT_S", "99999999999999999999");
    try {
      params::check("COMMFUSE_TIMEOUT_S");
      ADD_FAILURE() << "accepted";
    } catch (const commfuse::InvalidArgument& err) {
      EXPECT_NE(std::string(err.what()).find("=99999999999999999999 must be in [1, 86400]"),
                std::string::npos)
          << err.what();
    }
  }
  ScopedEnv slot("COMMFUSE_SHM_SLOT_BYTES", "8192");
  EXPECT_EQ(params::shm_slot_bytes(), 8192u);
}
