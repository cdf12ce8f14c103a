// COMMFUSE_VERBOSE's lines (core/log.cpp): at level 1 each distinct line once per process, at
// level 2 every one. The level is read once per process, so ctest runs this test under each
// level (tests/CMakeLists.txt: verbose_once_level1, verbose_every_level2); without one it
// says it was skipped.
#include <gtest/gtest.h>

#include <string>

#include "core/log.hpp"

namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Log, VerboseLinesByLevel) {
  const int level = commfuse::log::verbose_level();
  if (level < 1) GTEST_SKIP() << "COMMFUSE_VERBOSE is not set: nothing is printed";
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    commfuse::log::verbose("decision test-op(rank 0) one [ISA x]: first");
    commfuse::log::verbose("decision test-op(rank 0) two [ISA x]: second");
  }
  const std::string err = testing::internal::GetCapturedStderr();
  const size_t expected = level == 1 ? 1 : 3;
  EXPECT_EQ(count_of(err, "test-op(rank 0) one"), expected) << err;
  EXPECT_EQ(count_of(err, "test-op(rank 0) two"), expected) << err;
}

}  // namespace
