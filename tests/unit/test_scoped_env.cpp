// detail::ScopedEnv: the CLI's benchmarks build each column's plan under the algorithm it
// names (tools/commfuse/algo_scope.hpp), so the caller's setting must come back after the
// scope, also when the build throws.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/scoped_env.hpp"

namespace {

using commfuse::detail::ScopedEnv;

constexpr const char* kKey = "COMMFUSE_TEST_SCOPED_ENV";

std::string get() {
  const char* v = std::getenv(kKey);
  return v != nullptr ? v : "<unset>";
}

TEST(ScopedEnv, SetsForTheScopeAndRestoresTheValue) {
  setenv(kKey, "outer", 1);
  {
    const ScopedEnv e(kKey, "inner");
    EXPECT_EQ(get(), "inner");
  }
  EXPECT_EQ(get(), "outer");
  unsetenv(kKey);
}

TEST(ScopedEnv, UnsetBeforeIsUnsetAfter) {
  unsetenv(kKey);
  {
    const ScopedEnv e(kKey, std::string("inner"));
    EXPECT_EQ(get(), "inner");
  }
  EXPECT_EQ(get(), "<unset>");
}

TEST(ScopedEnv, NullUnsetsForTheScope) {
  setenv(kKey, "outer", 1);
  {
    const ScopedEnv e(kKey, nullptr);
    EXPECT_EQ(get(), "<unset>");
  }
  EXPECT_EQ(get(), "outer");
  unsetenv(kKey);
}

TEST(ScopedEnv, RestoresWhenTheScopeThrows) {
  setenv(kKey, "outer", 1);
  EXPECT_THROW(
      {
        const ScopedEnv e(kKey, "inner");
        throw std::runtime_error("plan build failed");
      },
      std::runtime_error);
  EXPECT_EQ(get(), "outer");
  unsetenv(kKey);
}

}  // namespace
