#include <gtest/gtest.h>

#include <commfuse/commfuse.h>

#include <string>
#include <thread>

#include "core/error.hpp"

TEST(Errors, StatusCodesMatchSpec) {
  EXPECT_EQ(COMMFUSE_SUCCESS, 0);
  EXPECT_EQ(COMMFUSE_PARAM_NULLPTR, 161001);
  EXPECT_EQ(COMMFUSE_PARAM_INVALID, 161002);
  EXPECT_EQ(COMMFUSE_RUNTIME_ERROR, 361001);
  EXPECT_EQ(COMMFUSE_INNER, 561000);
  EXPECT_STREQ(commfuseGetStatusName(COMMFUSE_RUNTIME_ERROR), "RUNTIME_ERROR");
  EXPECT_STREQ(commfuseGetStatusName(COMMFUSE_PARAM_INVALID), "PARAM_INVALID");
}

TEST(Errors, ExceptionTypeFollowsStatus) {
  using commfuse::Status;
  auto code_of = [](Status s) {
    try {
      commfuse::detail::throw_status(s, "msg");
    } catch (const commfuse::NullPointerError& e) {
      return std::make_pair(std::string("null"), e.code());
    } catch (const commfuse::InvalidArgument& e) {
      return std::make_pair(std::string("invalid"), e.code());
    } catch (const commfuse::RuntimeFailure& e) {
      return std::make_pair(std::string("runtime"), e.code());
    } catch (const commfuse::InternalError& e) {
      return std::make_pair(std::string("inner"), e.code());
    }
    return std::make_pair(std::string("none"), Status::kSuccess);
  };
  EXPECT_EQ(code_of(Status::kParamNullptr),
            std::make_pair(std::string("null"), Status::kParamNullptr));
  EXPECT_EQ(code_of(Status::kParamInvalid),
            std::make_pair(std::string("invalid"), Status::kParamInvalid));
  EXPECT_EQ(code_of(Status::kRuntimeError),
            std::make_pair(std::string("runtime"), Status::kRuntimeError));
  EXPECT_EQ(code_of(Status::kInner), std::make_pair(std::string("inner"), Status::kInner));
}

TEST(Errors, CheckMacrosCarryMessage) {
  try {
    CF_CHECK_ARG(1 + 1 == 3, "op(rank ", 3, "): x2 dim 0 is ", 512, " but x1 dim 1 is ", 768);
    FAIL();
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "op(rank 3): x2 dim 0 is 512 but x1 dim 1 is 768");
  }
  try {
    CF_ASSERT(2 < 1);
    FAIL();
  } catch (const commfuse::InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("test_errors.cpp"), std::string::npos);
  }
}

TEST(Errors, LastErrorIsPerThread) {
  uint8_t c = 0;
  ASSERT_EQ(commfuseConvert(nullptr, COMMFUSE_FLOAT32, &c, COMMFUSE_INT8, 1, 0),
            COMMFUSE_PARAM_NULLPTR);
  const std::string mine = commfuseGetLastErrorMessage();
  std::string other = "unset";
  std::thread t([&] { other = commfuseGetLastErrorMessage(); });
  t.join();
  EXPECT_FALSE(mine.empty());
  EXPECT_EQ(other, "");
}

// A reason cut to a wire descriptor's field stays valid UTF-8: never half a character.
TEST(Errors, CopyMessageCutsAtACharacterBoundary) {
  char field[8];
  commfuse::detail::copy_message(field, sizeof field, "abc");
  EXPECT_STREQ(field, "abc");
  commfuse::detail::copy_message(field, sizeof field, "abcdefghij");
  EXPECT_STREQ(field, "abcdefg");
  // "ab" + two 3-byte characters (8 bytes): 7 fit, the second character would be cut.
  commfuse::detail::copy_message(field, sizeof field, "ab\xe8\x8a\x82\xe7\x82\xb9");
  EXPECT_STREQ(field, "ab\xe8\x8a\x82");
  commfuse::detail::copy_message(field, 1, "abc");
  EXPECT_STREQ(field, "");
}

TEST(Errors, VersionString) {
  EXPECT_STREQ(commfuseGetVersion(), "0.1.0");
  EXPECT_STREQ(commfuse::version(), "0.1.0");
}
