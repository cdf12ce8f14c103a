// core/shared_library: the run-time loader of optional dependencies (cuBLASLt, NCCL) says
// which name loaded, or why nothing could be used, naming the library or the missing entry.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/shared_library.hpp"

namespace {

using StrlenFn = size_t (*)(const char*);

TEST(SharedLibrary, FirstNameThatLoadsAndItsEntryPoints) {
  commfuse::SharedLibrary lib{"libcommfuse-no-such-library.so.9", "libc.so.6"};
  EXPECT_EQ(lib.name(), "libc.so.6");
  StrlenFn fn = nullptr;
  ASSERT_TRUE(lib.resolve(fn, "strlen")) << lib.unavailable();
  EXPECT_EQ(fn("four"), 4u);
  EXPECT_TRUE(lib.unavailable().empty()) << lib.unavailable();
  StrlenFn missing = nullptr;
  EXPECT_FALSE(lib.resolve(missing, "commfuse_no_such_symbol"));
  EXPECT_EQ(missing, nullptr);
  EXPECT_EQ(lib.unavailable(), "libc.so.6 lacks commfuse_no_such_symbol");
  lib.fail("a later reason");  // the first reason stays
  EXPECT_EQ(lib.unavailable(), "libc.so.6 lacks commfuse_no_such_symbol");
}

TEST(SharedLibrary, NoneLoadsSaysWhy) {
  commfuse::SharedLibrary lib{"libcommfuse-no-such-library.so.9", "/nonexistent/libx.so"};
  EXPECT_TRUE(lib.name().empty());
  EXPECT_NE(lib.unavailable().find("libcommfuse-no-such-library.so.9 not found"), std::string::npos)
      << lib.unavailable();
  EXPECT_NE(lib.unavailable().find("/nonexistent/libx.so"), std::string::npos) << lib.unavailable();
  StrlenFn fn = nullptr;
  EXPECT_FALSE(lib.resolve(fn, "strlen"));
  EXPECT_NE(lib.unavailable().find("not found"), std::string::npos);  // still the first reason
}

TEST(SharedLibrary, FailRecordsAnInitializationError) {
  commfuse::SharedLibrary lib{"libc.so.6"};
  ASSERT_TRUE(lib.unavailable().empty());
  lib.fail("libc.so.6: init failed");
  EXPECT_EQ(lib.unavailable(), "libc.so.6: init failed");
}

}  // namespace
