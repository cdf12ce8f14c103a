// Integer conversions, int4 packing and the C entry points around them.
#include <gtest/gtest.h>

#include <commfuse/commfuse.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.hpp"

using commfuse::DType;

TEST(Int4, PackingNibbleOrder) {
  const int8_t v[] = {1, -2, 7, -8, 0};
  uint8_t packed[3] = {0xAA, 0xAA, 0xAA};
  commfuse::pack_int4(v, packed, 5);
  EXPECT_EQ(packed[0], 0xE1);  // element 0 low nibble, element 1 (-2 = 0xE) high nibble
  EXPECT_EQ(packed[1], 0x87);
  EXPECT_EQ(packed[2], 0xA0);  // odd count: the unused high nibble is kept
  int8_t back[5] = {};
  commfuse::unpack_int4(packed, back, 5);
  EXPECT_EQ(std::memcmp(v, back, 5), 0);
}

TEST(Int4, AllSixteenValuesRoundTrip) {
  std::vector<int8_t> v;
  for (int i = -8; i <= 7; ++i) v.push_back(static_cast<int8_t>(i));
  std::vector<uint8_t> packed(8);
  std::vector<float> f(16);
  commfuse::pack_int4(v.data(), packed.data(), 16);
  commfuse::convert(packed.data(), DType::kInt4, f.data(), DType::kFloat32, 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(f[i], static_cast<float>(i - 8));
  std::vector<uint8_t> again(8);
  commfuse::convert(f.data(), DType::kFloat32, again.data(), DType::kInt4, 16);
  EXPECT_EQ(packed, again);
}

TEST(Int4, PackOutOfRangeIsParamInvalidNamingElement) {
  const int8_t v[] = {1, 9};
  uint8_t packed[1] = {};
  try {
    commfuse::pack_int4(v, packed, 2);
    FAIL();
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("src[1] is 9"), std::string::npos) << e.what();
  }
}

// The int8 conversion over arrays long enough for every copy's vector body (core/simd.hpp):
// ties, NaN, infinities, values past the range and huge integers against the rule written
// out in double (round half to even, NaN -> 0, clamp to [-128, 127]).
TEST(ConvertInt, FloatToInt8ArraysMatchTheRule) {
  std::vector<float> x;
  for (int i = -600; i <= 600; ++i) x.push_back(static_cast<float>(i) * 0.25f);  // .25 steps
  for (float v : {NAN, -NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 8388609.0f, -16777216.0f, 127.49f,
                  127.5f, -128.5f, -128.49f, 0.49999997f, -0.0f})
    x.push_back(v);
  std::vector<int8_t> got(x.size());
  commfuse::convert(x.data(), DType::kFloat32, got.data(), DType::kInt8, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = std::isnan(x[i]) ? 0.0 : std::nearbyint(static_cast<double>(x[i]));
    const auto want = static_cast<int8_t>(std::clamp(r, -128.0, 127.0));
    ASSERT_EQ(got[i], want) << "x = " << x[i] << " (element " << i << ")";
  }
}

TEST(ConvertInt, FloatToIntRoundsHalfEvenSaturatesNanToZero) {
  const float x[] = {2.5f, 3.5f, -2.5f, 100.0f, -9.6f, NAN, 0.49f, INFINITY, -INFINITY};
  int8_t i8[9];
  commfuse::convert(x, DType::kFloat32, i8, DType::kInt8, 9);
  const int8_t want8[] = {2, 4, -2, 100, -10, 0, 0, 127, -128};
  EXPECT_EQ(std::memcmp(i8, want8, 9), 0);
  uint8_t i4[5];
  commfuse::convert(x, DType::kFloat32, i4, DType::kInt4, 9);
  int8_t un[9];
  commfuse::unpack_int4(i4, un, 9);
  const int8_t want4[] = {2, 4, -2, 7, -8, 0, 0, 7, -8};
  EXPECT_EQ(std::memcmp(un, want4, 9), 0);
  int32_t i32[2];
  const float big[] = {3e9f, -3e9f};
  commfuse::convert(big, DType::kFloat32, i32, DType::kInt32, 2);
  EXPECT_EQ(i32[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(i32[1], std::numeric_limits<int32_t>::min());
  int64_t i64[2];
  const float huge[] = {1e30f, -1e30f};
  commfuse::convert(huge, DType::kFloat32, i64, DType::kInt64, 2);
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[1], std::numeric_limits<int64_t>::min());
}

TEST(ConvertInt, IntegerToIntegerIsExactOrSaturating) {
  const int64_t x[] = {(int64_t{1} << 40) + 1, -200, 5, -9};
  int32_t i32[4];
  commfuse::convert(x, DType::kInt64, i32, DType::kInt32, 4);
  EXPECT_EQ(i32[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(i32[1], -200);
  int8_t i8[4];
  commfuse::convert(x, DType::kInt64, i8, DType::kInt8, 4);
  EXPECT_EQ(i8[1], -128);
  EXPECT_EQ(i8[2], 5);
  const int32_t big = (1 << 24) + 1;  // not representable in fp32: must not go through it
  int64_t back = 0;
  commfuse::convert(&big, DType::kInt32, &back, DType::kInt64, 1);
  EXPECT_EQ(back, big);
}

// Integers to narrower floats are rounded once, to nearest even: through fp32 to nearest
// first, 2^24 + 2^16 + 1 became 2^24 in bf16 (one ulp, 2^17, from the nearest, 2^24 + 2^17).
TEST(ConvertInt, IntegerToNarrowFloatRoundsOnce) {
  auto bf16_of = [](double v) {  // v's bf16 bits when v is a bf16 value
    const float f = static_cast<float>(v);
    uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    EXPECT_EQ(u & 0xFFFFu, 0u) << v;
    return static_cast<uint16_t>(u >> 16);
  };
  const int32_t i32[] = {(1 << 24) + (1 << 16) + 1, -((1 << 24) + (1 << 16) + 1), 1077936129,
                         (1 << 24) + (1 << 16)};  // the last a tie: to even, 2^24
  const double want32[] = {16908288.0, -16908288.0, 1082130432.0, 16777216.0};
  uint16_t got[4];
  commfuse::convert(i32, DType::kInt32, got, DType::kBFloat16, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], bf16_of(want32[i])) << i32[i];
  const int64_t i64[] = {(int64_t{1} << 62) + (int64_t{1} << 54) + 1, INT64_MAX, INT64_MIN,
                         (int64_t{1} << 53) + (int64_t{1} << 45) + 1};
  const double want64[] = {4647714815446351872.0, 9223372036854775808.0, -9223372036854775808.0,
                           9077567998918656.0};
  commfuse::convert(i64, DType::kInt64, got, DType::kBFloat16, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], bf16_of(want64[i])) << i64[i];
}

TEST(ConvertCApi, SuccessAndStatusCodes) {
  const float one = 1.0f;
  uint16_t bf = 0;
  EXPECT_EQ(commfuseConvert(&one, COMMFUSE_FLOAT32, &bf, COMMFUSE_BFLOAT16, 1, 0),
            COMMFUSE_SUCCESS);
  EXPECT_EQ(bf, 0x3F80);
  EXPECT_EQ(commfuseConvert(nullptr, COMMFUSE_FLOAT32, &bf, COMMFUSE_BFLOAT16, 1, 0),
            COMMFUSE_PARAM_NULLPTR);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("src is null"), std::string::npos);
  EXPECT_EQ(commfuseConvert(&one, COMMFUSE_FLOAT32, &bf, static_cast<commfuseDataType>(99), 1, 0),
            COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("dst_dtype value 99"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
  // count 0 with null pointers is a valid no-op, as for memcpy.
  EXPECT_EQ(commfuseConvert(nullptr, COMMFUSE_FLOAT32, nullptr, COMMFUSE_INT8, 0, 0),
            COMMFUSE_SUCCESS);
}

// Buffers that share memory: a conversion between formats, pack and unpack are refused (in
// place, fp16 to fp32 and unpack_int4 returned success with wrong values); a convert to the
// same format is a copy and may overlap, as memmove, and a pack may run in place.
TEST(ConvertCApi, OverlappingBuffersAreParamInvalidExceptACopy) {
  alignas(8) uint8_t buf[64] = {};
  for (int i = 0; i < 16; ++i) reinterpret_cast<uint16_t*>(buf)[i] = 0x3C00;  // fp16 1.0
  EXPECT_EQ(commfuseConvert(buf, COMMFUSE_FLOAT16, buf, COMMFUSE_FLOAT32, 16, 0),
            COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("convert: dst and src share memory"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
  // Narrowing in place and a partial overlap: refused too.
  EXPECT_EQ(commfuseConvert(buf, COMMFUSE_FLOAT32, buf + 4, COMMFUSE_FLOAT16, 8, 0),
            COMMFUSE_PARAM_INVALID);
  // (values inside [-8, 7], so that only the overlap can refuse it)
  std::memset(buf, 1, sizeof buf);
  EXPECT_EQ(commfusePackInt4(reinterpret_cast<int8_t*>(buf + 1), buf, 8), COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("pack_int4: dst and src share"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
  EXPECT_EQ(commfuseUnpackInt4(buf, reinterpret_cast<int8_t*>(buf + 2), 8), COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("unpack_int4: dst and src share"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
  // Adjacent buffers do not overlap.
  EXPECT_EQ(commfuseUnpackInt4(buf, reinterpret_cast<int8_t*>(buf + 4), 8), COMMFUSE_SUCCESS);
  // The same format, overlapping: a memmove.
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(commfuseConvert(buf, COMMFUSE_INT8, buf + 2, COMMFUSE_INT8, 6, 0), COMMFUSE_SUCCESS);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(buf[2 + i], i);
  // int4 to int4 too (whole bytes, then an odd count's last nibble), in place or shifted.
  const uint8_t packed[3] = {0x21, 0x43, 0xF5};  // 1, 2, 3, 4, 5 (and a high nibble kept)
  std::memcpy(buf, packed, 3);
  EXPECT_EQ(commfuseConvert(buf, COMMFUSE_INT4, buf, COMMFUSE_INT4, 5, 0), COMMFUSE_SUCCESS);
  EXPECT_EQ(std::memcmp(buf, packed, 3), 0);
  buf[4] = 0xA0;
  EXPECT_EQ(commfuseConvert(buf, COMMFUSE_INT4, buf + 2, COMMFUSE_INT4, 5, 0), COMMFUSE_SUCCESS);
  EXPECT_EQ(buf[2], 0x21);
  EXPECT_EQ(buf[3], 0x43);
  EXPECT_EQ(buf[4], 0xA5);  // element 4 in the low nibble, dst's high nibble kept
  // A pack in place: byte i/2 is written after byte i was read.
  const int8_t vals[5] = {1, -2, 3, -8, 7};
  std::memcpy(buf, vals, 5);
  EXPECT_EQ(commfusePackInt4(reinterpret_cast<int8_t*>(buf), buf, 5), COMMFUSE_SUCCESS);
  int8_t back[5] = {};
  EXPECT_EQ(commfuseUnpackInt4(buf, back, 5), COMMFUSE_SUCCESS);
  EXPECT_EQ(std::memcmp(back, vals, 5), 0);
}

// A count no buffer can hold (2^62 float32 are 2^64 bytes) is PARAM_INVALID naming count,
// checked before anything is read: the converting loop ran into unmapped memory (SIGSEGV),
// and the same-dtype copy's error named an internal function. The larger of the two dtypes
// decides: 2^62 float8 would fit, their float32 source would not.
TEST(ConvertCApi, CountNoBufferCanHoldIsParamInvalidNamingCount) {
  float src[4] = {1, 2, 3, 4};
  uint8_t dst[16] = {};
  const uint64_t huge = uint64_t{1} << 62;
  for (const commfuseDataType to : {COMMFUSE_FLOAT8_E4M3FN, COMMFUSE_FLOAT32}) {
    EXPECT_EQ(commfuseConvert(src, COMMFUSE_FLOAT32, dst, to, huge, 0), COMMFUSE_PARAM_INVALID);
    const std::string message = commfuseGetLastErrorMessage();
    EXPECT_NE(message.find("convert: count 4611686018427387904 is too large: float32 elements "
                           "exceed the largest buffer"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(commfuseConvert(dst, COMMFUSE_FLOAT8_E4M3FN, src, COMMFUSE_FLOAT32, huge, 0),
            COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("is too large: float32"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
  EXPECT_EQ(dst[0], 0);  // nothing written
  // The int4 helpers alike (2^63 int8 elements are past PTRDIFF_MAX bytes).
  const int8_t values[2] = {1, -1};
  EXPECT_EQ(commfusePackInt4(values, dst, uint64_t{1} << 63), COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("pack_int4: count 9223372036854775808"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
  int8_t unpacked[2] = {};
  EXPECT_EQ(commfuseUnpackInt4(dst, unpacked, uint64_t{1} << 63), COMMFUSE_PARAM_INVALID);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("unpack_int4: count"),
            std::string::npos)
      << commfuseGetLastErrorMessage();
}

TEST(ConvertDataMovementTypes, RejectedAsSourceAndTargetNamingThem) {
  // uint8/int16/uint16/bool have no conversion rules (SPEC §1): refused both ways, even to
  // themselves and for count 0, and dst is left untouched.
  const std::pair<DType, const char*> types[] = {{DType::kUInt8, "uint8"},
                                                 {DType::kInt16, "int16"},
                                                 {DType::kUInt16, "uint16"},
                                                 {DType::kBool, "bool"}};
  const float src[2] = {1.0f, 2.0f};
  for (const auto& [t, name] : types) {
    for (const auto& [from, to, what] :
         {std::tuple{DType::kFloat32, t, "dst_dtype"}, std::tuple{t, DType::kFloat32, "src_dtype"},
          std::tuple{t, t, "src_dtype"}}) {
      for (size_t count : {size_t{2}, size_t{0}}) {
        uint8_t dst[8];
        std::memset(dst, 0xCD, sizeof dst);
        try {
          commfuse::convert(src, from, dst, to, count);
          ADD_FAILURE() << "convert accepted " << name;
        } catch (const commfuse::InvalidArgument& e) {
          const std::string want =
              std::string("convert: ") + what + " " + name + " is a data-movement dtype";
          EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
        for (uint8_t b : dst) EXPECT_EQ(b, 0xCD);
      }
    }
    uint8_t dst[8] = {};
    const auto ct = static_cast<commfuseDataType>(t);
    EXPECT_EQ(commfuseConvert(src, COMMFUSE_FLOAT32, dst, ct, 2, 0), COMMFUSE_PARAM_INVALID);
    EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find(name), std::string::npos)
        << commfuseGetLastErrorMessage();
    EXPECT_EQ(commfuseConvert(dst, ct, dst, COMMFUSE_INT8, 2, 0), COMMFUSE_PARAM_INVALID);
  }
}

TEST(ConvertCApi, SaturateFlag) {
  const float big = 1000.0f;
  uint8_t c = 0;
  ASSERT_EQ(commfuseConvert(&big, COMMFUSE_FLOAT32, &c, COMMFUSE_FLOAT8_E4M3FN, 1, 0),
            COMMFUSE_SUCCESS);
  EXPECT_EQ(c, 0x7F);
  ASSERT_EQ(commfuseConvert(&big, COMMFUSE_FLOAT32, &c, COMMFUSE_FLOAT8_E4M3FN, 1, 1),
            COMMFUSE_SUCCESS);
  EXPECT_EQ(c, 0x7E);
  // Within one format too: an infinity saturates to the largest finite code (it was copied).
  const uint8_t inf[] = {0x7C, 0xFC, 0x7B};  // e5m2 +inf, -inf, +57344
  uint8_t out[3];
  ASSERT_EQ(commfuseConvert(inf, COMMFUSE_FLOAT8_E5M2, out, COMMFUSE_FLOAT8_E5M2, 3, 1),
            COMMFUSE_SUCCESS);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 3), (std::vector<uint8_t>{0x7B, 0xFB, 0x7B}));
  ASSERT_EQ(commfuseConvert(inf, COMMFUSE_FLOAT8_E5M2, out, COMMFUSE_FLOAT8_E5M2, 3, 0),
            COMMFUSE_SUCCESS);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 3), (std::vector<uint8_t>{0x7C, 0xFC, 0x7B}));
  const uint8_t hif8_inf[] = {0x6F, 0xEF};  // HiFloat8 +-inf
  ASSERT_EQ(commfuseConvert(hif8_inf, COMMFUSE_HIFLOAT8, out, COMMFUSE_HIFLOAT8, 2, 1),
            COMMFUSE_SUCCESS);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 2), (std::vector<uint8_t>{0x6E, 0xEE}));
}

TEST(ConvertCApi, Int4PackUnpackAndNames) {
  const int8_t v[] = {3, -4};
  uint8_t p = 0;
  ASSERT_EQ(commfusePackInt4(v, &p, 2), COMMFUSE_SUCCESS);
  EXPECT_EQ(p, 0xC3);
  int8_t u[2] = {};
  ASSERT_EQ(commfuseUnpackInt4(&p, u, 2), COMMFUSE_SUCCESS);
  EXPECT_EQ(u[1], -4);
  const int8_t bad[] = {8};
  EXPECT_EQ(commfusePackInt4(bad, &p, 1), COMMFUSE_PARAM_INVALID);
  commfuseDataType t;
  ASSERT_EQ(commfuseDataTypeFromName("float8_e8m0fnu", &t), COMMFUSE_SUCCESS);
  EXPECT_EQ(t, COMMFUSE_FLOAT8_E8M0);
  EXPECT_STREQ(commfuseDataTypeName(COMMFUSE_HIFLOAT8), "hifloat8");
  int bits = 0;
  ASSERT_EQ(commfuseDataTypeBits(COMMFUSE_INT4, &bits), COMMFUSE_SUCCESS);
  EXPECT_EQ(bits, 4);
  EXPECT_EQ(commfuseDataTypeFromName("nope", &t), COMMFUSE_PARAM_INVALID);
  EXPECT_EQ(commfuseDataTypeFromName(nullptr, &t), COMMFUSE_PARAM_NULLPTR);
}
