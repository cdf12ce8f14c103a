#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

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
