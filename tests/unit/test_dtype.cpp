#include <gtest/gtest.h>

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.hpp"

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
      {DType::kUInt8, "uint8"},
      {DType::kInt16, "int16"},
      {DType::kUInt16, "uint16"},
      {DType::kBool, "bool"},
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
  EXPECT_EQ(commfuse::dtype_from_name("short"), DType::kInt16);  // torch.short
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
  EXPECT_EQ(static_cast<int>(DType::kUInt8), 4);  // ACL_UINT8
  EXPECT_EQ(static_cast<int>(DType::kInt16), 6);  // ACL_INT16
  EXPECT_EQ(static_cast<int>(DType::kUInt16), 7);
  EXPECT_EQ(static_cast<int>(DType::kBool), 12);
  EXPECT_EQ(COMMFUSE_UINT8, 4);
  EXPECT_EQ(COMMFUSE_INT16, 6);
  EXPECT_EQ(COMMFUSE_UINT16, 7);
  EXPECT_EQ(COMMFUSE_BOOL, 12);
}

TEST(DType, DataMovementTypesThroughTheCApi) {
  const std::pair<commfuseDataType, const char*> expected[] = {
      {COMMFUSE_UINT8, "uint8"},
      {COMMFUSE_INT16, "int16"},
      {COMMFUSE_UINT16, "uint16"},
      {COMMFUSE_BOOL, "bool"},
  };
  for (const auto& [dtype, name] : expected) {
    EXPECT_STREQ(commfuseDataTypeName(dtype), name);
    commfuseDataType parsed = COMMFUSE_FLOAT32;
    EXPECT_EQ(commfuseDataTypeFromName(name, &parsed), COMMFUSE_SUCCESS) << name;
    EXPECT_EQ(parsed, dtype) << name;
  }
  int bits = 0;
  EXPECT_EQ(commfuseDataTypeBits(COMMFUSE_BOOL, &bits), COMMFUSE_SUCCESS);
  EXPECT_EQ(bits, 8);
  EXPECT_EQ(commfuseDataTypeBits(COMMFUSE_UINT16, &bits), COMMFUSE_SUCCESS);
  EXPECT_EQ(bits, 16);
}

TEST(DType, Bits) {
  EXPECT_EQ(commfuse::dtype_bits(DType::kInt4), 4);
  EXPECT_EQ(commfuse::dtype_bits(DType::kHiFloat8), 8);
  EXPECT_EQ(commfuse::dtype_bits(DType::kBFloat16), 16);
  EXPECT_EQ(commfuse::dtype_bits(DType::kInt64), 64);
  EXPECT_EQ(commfuse::dtype_bits(DType::kUInt8), 8);
  EXPECT_EQ(commfuse::dtype_bits(DType::kInt16), 16);
  EXPECT_EQ(commfuse::dtype_bits(DType::kUInt16), 16);
  EXPECT_EQ(commfuse::dtype_bits(DType::kBool), 8);  // one byte per element, as numpy/torch
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kInt16, 7), 14u);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kBool, 7), 7u);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kInt4, 7), 4u);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kFloat32, 7), 28u);
  // The largest counts whose bytes a size_t holds, and one past: an error, not a wrapped size.
  const size_t most = SIZE_MAX;
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kInt8, most), most);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kInt4, most), size_t{1} << 63);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kFloat32, most / 4), most - 3);
  EXPECT_EQ(commfuse::dtype_storage_bytes(DType::kInt64, most / 8), most - 7);
  for (const auto& [t, count] : {std::pair{DType::kFloat32, most / 4 + 1},
                                 {DType::kFloat32, size_t{1} << 62},
                                 {DType::kInt64, most / 8 + 1},
                                 {DType::kInt16, size_t{1} << 63}}) {
    try {
      commfuse::dtype_storage_bytes(t, count);
      ADD_FAILURE() << commfuse::dtype_name(t) << " x " << count << ": no exception";
    } catch (const commfuse::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(count)), std::string::npos) << e.what();
    }
  }
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
  // 5 is unused in aclDataType; 8 (ACL_UINT32) and 11 (ACL_DOUBLE) are not commfuse dtypes.
  for (int v : {5, 8, 11})
    EXPECT_THROW(commfuse::dtype_bits(static_cast<DType>(v)), commfuse::InvalidArgument) << v;
}

// commfuse.h: a failure's message says which function failed. The dtype checks of these
// three once said only "unknown dtype value 195" (found by fuzz/targets/convert.cpp).
TEST(DType, CApiRejectionsNameTheFunction) {
  const auto bad = static_cast<commfuseDataType>(195);
  int bits = 0;
  EXPECT_EQ(commfuseDataTypeBits(bad, &bits), COMMFUSE_PARAM_INVALID);
  EXPECT_NE(
      std::string(commfuseGetLastErrorMessage()).find("commfuseDataTypeBits: dtype value 195"),
      std::string::npos)
      << commfuseGetLastErrorMessage();
  const int64_t shape[] = {2, 3};
  EXPECT_EQ(commfuseCreateTensor(shape, 2, nullptr, bad, nullptr), nullptr);
  EXPECT_NE(
      std::string(commfuseGetLastErrorMessage()).find("commfuseCreateTensor: dtype value 195"),
      std::string::npos)
      << commfuseGetLastErrorMessage();
  commfuseDataType t = COMMFUSE_FLOAT32;
  EXPECT_EQ(commfuseDataTypeFromName("float7", &t), COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("commfuseDataTypeFromName: "),
            std::string::npos)
      << commfuseGetLastErrorMessage();
}

// The integer sums run block by block over the sources (vectorized); they must stay exact
// and saturate once, at the end: against an element-by-element int64 reference, across
// block boundaries (1024), with values at the extremes, and with dst aliasing a source.
template <typename T>
void expect_integer_sums_exact() {
  const size_t count = 2500;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> any(std::numeric_limits<T>::min(),
                                             std::numeric_limits<T>::max());
  for (int n_src : {1, 2, 3, 5}) {
    std::vector<std::vector<T>> in(static_cast<size_t>(n_src), std::vector<T>(count));
    for (auto& v : in)
      for (size_t i = 0; i < count; ++i)
        v[i] = i % 7 == 0   ? std::numeric_limits<T>::max()
               : i % 7 == 1 ? std::numeric_limits<T>::min()
                            : static_cast<T>(any(rng));
    std::vector<T> want(count);
    for (size_t i = 0; i < count; ++i) {
      int64_t sum = 0;
      for (const auto& v : in) sum += v[i];
      want[i] = static_cast<T>(
          std::clamp<int64_t>(sum, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
    }
    std::vector<const void*> srcs;
    for (const auto& v : in) srcs.push_back(v.data());
    std::vector<T> out(count);
    const DType t = sizeof(T) == 1 ? DType::kInt8 : DType::kInt32;
    commfuse::kernels::cpu::reduce_sum(srcs.data(), n_src, out.data(), count, t);
    EXPECT_EQ(out, want) << commfuse::dtype_name(t) << " n_src " << n_src;
    // In place over the last source.
    commfuse::kernels::cpu::reduce_sum(srcs.data(), n_src, in.back().data(), count, t);
    EXPECT_EQ(in.back(), want) << commfuse::dtype_name(t) << " n_src " << n_src << " in place";
  }
}

TEST(DType, IntegerSumsAreExactAndSaturateOnce) {
  expect_integer_sums_exact<int8_t>();
  expect_integer_sums_exact<int32_t>();
}

TEST(DType, DataMovementTypesCannotBeSummed) {
  // The one predicate every sum (all_reduce, reduce_scatter, the reduce kernel) checks.
  for (DType t : {DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kBool}) {
    EXPECT_FALSE(commfuse::kernels::cpu::reducible(t)) << commfuse::dtype_name(t);
    uint8_t a[4] = {1, 2, 3, 4}, out[4] = {};
    const void* srcs[] = {a, a};
    try {
      commfuse::kernels::cpu::reduce_sum(srcs, 2, out, 2, t);
      ADD_FAILURE() << "reduce_sum accepted " << commfuse::dtype_name(t);
    } catch (const commfuse::InvalidArgument& e) {
      const std::string want = "dtype " + std::string(commfuse::dtype_name(t)) +
                               " cannot be summed (only float32, float16, bfloat16, int8, int32)";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8, DType::kInt32})
    EXPECT_TRUE(commfuse::kernels::cpu::reducible(t)) << commfuse::dtype_name(t);
}
