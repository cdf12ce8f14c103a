#include <gtest/gtest.h>

#include <commfuse/commfuse.hpp>

#include <string>

using commfuse::DType;

TEST(DType, NamesRoundTripAndMatchMlDtypes) {
  const std::pair<DType, const char*> expected[] = {
      {DType::kFloat32, "float32"},
      {DType::kFloat16, "float16"},
      {DType::kBFloat16, "bfloat16"},
      {DType::kInt8, "int8"},
      {DType::kInt4, "int4"},
      {DType::kInt32, "int32"},
      {DType::kInt64, "int64"},
      {DType::kFloat8E4M3FN, "float8_e4m3fn"},
      {DType::kFloat8E5M2, "float8_e5m2"},
      {DType::kHiFloat8, "hifloat8"},
      {DType::kFloat8E8M0, "float8_e8m0"},
  };
  for (const auto& [dtype, name] : expected) {
    EXPECT_EQ(commfuse::dtype_name(dtype), name);
    EXPECT_EQ(commfuse::dtype_from_name(name), dtype) << name;
  }
}

TEST(DType, AliasesAccepted) {
  EXPECT_EQ(commfuse::dtype_from_name("float8_e8m0fnu"), DType::kFloat8E8M0);
  EXPECT_EQ(commfuse::dtype_from_name("bf16"), DType::kBFloat16);
  EXPECT_EQ(commfuse::dtype_from_name("half"), DType::kFloat16);
}

TEST(DType, ValuesFollowAclDataType) {
  // Ported aclnn code passes these numbers; they must not drift.
  EXPECT_EQ(static_cast<int>(DType::kFloat32), 0);
  EXPECT_EQ(static_cast<int>(DType::kFloat16), 1);
  EXPECT_EQ(static_cast<int>(DType::kInt8), 2);
  EXPECT_EQ(static_cast<int>(DType::kInt32), 3);
  EXPECT_EQ(static_cast<int>(DType::kInt64), 9);
  EXPECT_EQ(static_cast<int>(DType::kBFloat16), 27);
  EXPECT_EQ(static_cast<int>(DType::kInt4), 29);
  EXPECT_EQ(static_cast<int>(DType::kHiFloat8), 34);
  EXPECT_EQ(static_cast<int>(DType::kFloat8E5M2), 35);
  EXPECT_EQ(static_cast<int>(DType::kFloat8E4M3FN), 36);
  EXPECT_EQ(static_cast<int>(DType::kFloat8E8M0), 37);
}

TEST(DType, Bits) {
  EXPECT_EQ(commfuse::dtype_bits(DType::kInt4), 4);
  EXPECT_EQ(commfuse::dtype_bits(DType::kHiFloat8), 8);
  EXPECT_EQ(commfuse::dtype_bits(DType::kBFloat16), 16);
  EXPECT_EQ(commfuse::dtype_bits(DType::kInt64), 64);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kInt4, 7), 4u);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kFloat32, 7), 28u);
}

TEST(DType, UnknownNameIsParamInvalidNamingIt) {
  try {
    commfuse::dtype_from_name("float7");
    FAIL() << "no exception";
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid);
    EXPECT_NE(std::string(e.what()).find("'float7'"), std::string::npos) << e.what();
  }
}

TEST(DType, UnknownValueIsParamInvalid) {
  EXPECT_THROW(commfuse::dtype_bits(static_cast<DType>(5)), commfuse::InvalidArgument);
}
