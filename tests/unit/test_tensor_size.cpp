// Tensor shapes whose size is no int64 (found by fuzz/: their stride and element-count
// products overflowed, undefined behaviour in commfuseCreateTensor, TensorView and
// numel()). They are rejected where they enter, and numel() stays defined.
#include <gtest/gtest.h>

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "ops/common/tensor_size.hpp"

namespace {

constexpr int64_t kBig = int64_t{1} << 62;

TEST(TensorSize, CreateTensorRejectsMoreThanInt64Bytes) {
  const int64_t overflow[] = {INT64_MAX, int64_t{1} << 21};  // was: 2^63 * 2^21 in int64
  EXPECT_EQ(commfuseCreateTensor(overflow, 2, nullptr, COMMFUSE_FLOAT16, nullptr), nullptr);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage())
                .find("commfuseCreateTensor: shape (9223372036854775807, 2097152) holds more "
                      "than 2^63 - 1 bytes of float16"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
  // Elements fit but bytes do not: 2^62 fp16 values.
  const int64_t bytes_overflow[] = {kBig};
  EXPECT_EQ(commfuseCreateTensor(bytes_overflow, 1, nullptr, COMMFUSE_FLOAT16, nullptr), nullptr);
  // An empty tensor still needs representable strides: (0, 2^62, 4).
  const int64_t empty_overflow[] = {0, kBig, 4};
  EXPECT_EQ(commfuseCreateTensor(empty_overflow, 3, nullptr, COMMFUSE_INT8, nullptr), nullptr);
}

TEST(TensorSize, CreateTensorAcceptsTheLargestSizes) {
  for (auto [shape, dt] :
       {std::pair{std::array<int64_t, 2>{kBig, 1}, COMMFUSE_INT8},
        std::pair{std::array<int64_t, 2>{kBig, 1}, COMMFUSE_INT4},
        std::pair{std::array<int64_t, 2>{0, kBig}, COMMFUSE_INT8},
        std::pair{std::array<int64_t, 2>{int64_t{1} << 30, 1 << 30}, COMMFUSE_FLOAT32}}) {
    commfuseTensor_t* t = commfuseCreateTensor(shape.data(), 2, nullptr, dt, nullptr);
    EXPECT_NE(t, nullptr) << shape[0] << " x " << shape[1] << ": " << commfuseGetLastErrorMessage();
    commfuseDestroyTensor(t);
  }
}

TEST(TensorSize, TensorViewConstructorRejectsOverflow) {
  try {
    commfuse::TensorView v(nullptr, commfuse::DType::kInt8, {kBig, 2, 2});
    FAIL() << "accepted";
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("more than 2^63 - 1 elements"), std::string::npos)
        << e.what();
  }
}

TEST(TensorSize, NumelSaturatesAndSizeFitsSaysSo) {
  commfuse::TensorView v;  // fields set directly, as a C++ caller may
  v.ndim = 3;
  v.shape[0] = kBig;
  v.shape[1] = 4;
  v.shape[2] = 1;
  EXPECT_EQ(v.numel(), INT64_MAX);
  EXPECT_FALSE(commfuse::ops::size_fits_int64(v));
  v.shape[1] = 1;
  EXPECT_EQ(v.numel(), kBig);
  v.dtype = commfuse::DType::kInt8;
  EXPECT_TRUE(commfuse::ops::size_fits_int64(v));
  v.dtype = commfuse::DType::kFloat32;
  EXPECT_FALSE(commfuse::ops::size_fits_int64(v));
}

// quantize / dequantize check a view's size before walking its strides (a view whose
// dims multiply past 2^63 overflowed there, and its rows were then read past the buffer).
TEST(TensorSize, QuantizeRejectsMoreThanInt64Bytes) {
  int dummy = 0;           // never read: the call is rejected first
  commfuse::TensorView x;  // fields set directly, as a C++ caller may: (2^62, 4, 128) float32
  x.data = &dummy;
  x.dtype = commfuse::DType::kFloat32;
  x.ndim = 3;
  x.shape[0] = kBig;
  x.shape[1] = 4;
  x.shape[2] = 128;
  x.strides[0] = 512;
  x.strides[1] = 128;
  x.strides[2] = 1;
  commfuse::TensorView q = x;
  q.dtype = commfuse::DType::kInt8;
  commfuse::TensorView scales = x;
  scales.shape[2] = 1;
  scales.strides[0] = 4;
  scales.strides[1] = 1;
  try {
    commfuse::quantize(x, "per_token_group", q, scales, 128);
    FAIL() << "accepted";
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("holds more than 2^63 - 1 bytes"), std::string::npos)
        << e.what();
  }
}

// commfuse.h: callers may pass any int as a dtype or status; in C++ a value outside an
// enum's range is undefined behaviour, and negative ints were outside commfuseDataType's
// until it got a MIN enumerator (UBSan's -fsanitize=enum reported the fuzzers' -1).
TEST(TensorSize, NegativeDTypeValuesAreRejectedNotUndefined) {
  static_assert(COMMFUSE_DATATYPE_MIN_ENUM_ == INT32_MIN && COMMFUSE_STATUS_MIN_ENUM_ == INT32_MIN);
  const auto negative = static_cast<commfuseDataType>(-1);
  int bits = 0;
  EXPECT_EQ(commfuseDataTypeBits(negative, &bits), COMMFUSE_PARAM_INVALID);
  const int64_t shape[] = {2};
  EXPECT_EQ(commfuseCreateTensor(shape, 1, nullptr, negative, nullptr), nullptr);
  float x = 1.0f;
  EXPECT_EQ(commfuseConvert(&x, negative, &x, COMMFUSE_FLOAT32, 1, 0), COMMFUSE_PARAM_INVALID);
}

}  // namespace

// The bytes a tensor's strides span, not only its element count, must fit an int64.
TEST(TensorSize, SpanFitsInt64FollowsTheStrides) {
  using commfuse::DType;
  using commfuse::TensorView;
  alignas(8) static float x[1];
  const int64_t big = int64_t{1} << 62;
  EXPECT_TRUE(commfuse::ops::span_fits_int64(TensorView(x, DType::kFloat32, {5, 4}, {4, 1})));
  // 4 rows of 2^62 elements: 2^64 elements, wrapped to 0 in uint64 arithmetic.
  EXPECT_FALSE(commfuse::ops::span_fits_int64(TensorView(x, DType::kInt8, {5, 4}, {big, 1})));
  // 2 rows of 2^62 float32: 2^64 + bytes.
  EXPECT_FALSE(commfuse::ops::span_fits_int64(TensorView(x, DType::kFloat32, {2, 4}, {big, 1})));
  EXPECT_TRUE(commfuse::ops::span_fits_int64(TensorView(x, DType::kInt8, {2, 4}, {big, 1})));
  // Negative strides count by size; a dim of 1 is never stepped, nor an empty tensor's.
  EXPECT_FALSE(commfuse::ops::span_fits_int64(TensorView(x, DType::kInt8, {3, 4}, {-big, 1})));
  EXPECT_TRUE(commfuse::ops::span_fits_int64(TensorView(x, DType::kInt8, {1, 4}, {INT64_MIN, 1})));
  EXPECT_TRUE(commfuse::ops::span_fits_int64(TensorView(x, DType::kInt8, {0, 4}, {big, big})));
}
