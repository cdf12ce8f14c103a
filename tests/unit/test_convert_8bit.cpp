// The 8-bit formats: all 256 codes decoded and re-encoded, every rounding midpoint between
// adjacent codes, the overflow/underflow thresholds of SPEC §1 in both saturate modes,
// NaN and infinity handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/convert_ref.hpp"
#include "test_util.hpp"

using cftest::bits;
using cftest::decode;
using cftest::encode;
using cftest::from_bits;
using commfuse::DType;

namespace {

struct Fmt8 {
  DType dtype;
  float (*ref_decode)(uint8_t);
  uint8_t (*ref_encode)(float, bool);
};

const Fmt8 kE4M3{DType::kFloat8E4M3FN, commfuse::ref::e4m3fn_to_f32, commfuse::ref::f32_to_e4m3fn};
const Fmt8 kE5M2{DType::kFloat8E5M2, commfuse::ref::e5m2_to_f32, commfuse::ref::f32_to_e5m2};
const Fmt8 kHiF8{DType::kHiFloat8, commfuse::ref::hif8_to_f32, commfuse::ref::f32_to_hif8};
const Fmt8 kE8M0{DType::kFloat8E8M0, commfuse::ref::e8m0_to_f32, commfuse::ref::f32_to_e8m0};

void check_all_codes(const Fmt8& f) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float v = decode(code, f.dtype);
    ASSERT_EQ(bits(v), bits(f.ref_decode(code))) << std::hex << c;
    for (const bool sat : {false, true}) {
      const auto back = encode<uint8_t>(v, f.dtype, sat);
      ASSERT_EQ(back, f.ref_encode(v, sat)) << std::hex << c;
      if (std::isnan(v)) {
        ASSERT_TRUE(std::isnan(decode(back, f.dtype))) << std::hex << c;
      } else if (std::isinf(v) && sat) {
        // Saturating mode maps inf to the largest finite value of the same sign.
        const float s = decode(back, f.dtype);
        ASSERT_TRUE(std::isfinite(s) && std::signbit(s) == std::signbit(v)) << std::hex << c;
      } else {
        ASSERT_EQ(back, code) << std::hex << c << " sat " << sat;
      }
    }
  }
}

// Sorted distinct positive finite values of a format, with their codes.
std::vector<std::pair<double, uint8_t>> positive_finite(const Fmt8& f) {
  std::vector<std::pair<double, uint8_t>> v;
  for (int c = 0; c < 256; ++c) {
    const double x = f.ref_decode(static_cast<uint8_t>(c));
    if (std::isfinite(x) && x > 0) v.emplace_back(x, static_cast<uint8_t>(c));
  }
  std::sort(v.begin(), v.end());
  return v;
}

// For every pair of adjacent positive values, check the midpoint and one fp32 ulp on
// either side. tie_code decides which neighbour a tie goes to.
template <typename TieRule>
void check_midpoints(const Fmt8& f, TieRule tie_code, bool with_negative) {
  const auto vals = positive_finite(f);
  ASSERT_GT(vals.size(), 10u);
  for (size_t i = 0; i + 1 < vals.size(); ++i) {
    const auto [a, ca] = vals[i];
    const auto [b, cb] = vals[i + 1];
    const auto mid = static_cast<float>((a + b) / 2);
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const float below = std::nextafter(mid, 0.0f), above = std::nextafter(mid, INFINITY);
    const uint8_t want_tie = tie_code(ca, cb);
    for (const bool sat : {false, true}) {
      EXPECT_EQ(encode<uint8_t>(mid, f.dtype, sat), want_tie) << "tie " << a << ".." << b;
      EXPECT_EQ(encode<uint8_t>(below, f.dtype, sat), ca) << "below tie " << a << ".." << b;
      EXPECT_EQ(encode<uint8_t>(above, f.dtype, sat), cb) << "above tie " << a << ".." << b;
      EXPECT_EQ(f.ref_encode(mid, sat), want_tie);
      EXPECT_EQ(f.ref_encode(below, sat), ca);
      EXPECT_EQ(f.ref_encode(above, sat), cb);
      if (with_negative) {
        EXPECT_EQ(encode<uint8_t>(-mid, f.dtype, sat), want_tie | 0x80) << "tie " << -a;
        EXPECT_EQ(encode<uint8_t>(-below, f.dtype, sat), ca | 0x80);
        EXPECT_EQ(encode<uint8_t>(-above, f.dtype, sat), cb | 0x80);
      }
    }
  }
}

uint8_t tie_even(uint8_t ca, uint8_t cb) {
  return (ca & 1) ? cb : ca;
}
uint8_t tie_away(uint8_t, uint8_t cb) {
  return cb;
}  // positive: away from zero = larger

}  // namespace

TEST(ConvertE4M3FN, AllCodes) {
  check_all_codes(kE4M3);
}
TEST(ConvertE5M2, AllCodes) {
  check_all_codes(kE5M2);
}
TEST(ConvertHiFloat8, AllCodes) {
  check_all_codes(kHiF8);
}
TEST(ConvertE8M0, AllCodes) {
  check_all_codes(kE8M0);
}

TEST(ConvertE4M3FN, EveryRoundingMidpointRNE) {
  check_midpoints(kE4M3, tie_even, true);
}
TEST(ConvertE5M2, EveryRoundingMidpointRNE) {
  check_midpoints(kE5M2, tie_even, true);
}
TEST(ConvertHiFloat8, EveryRoundingMidpointHalfAway) {
  check_midpoints(kHiF8, tie_away, true);
}
TEST(ConvertE8M0, EveryRoundingMidpointTiesUp) {
  check_midpoints(kE8M0, tie_away, false);
}

TEST(ConvertE4M3FN, OverflowAndSpecials) {
  const DType t = DType::kFloat8E4M3FN;
  EXPECT_EQ(encode<uint8_t>(448.0f, t), 0x7E);
  EXPECT_EQ(encode<uint8_t>(464.0f, t), 0x7E);  // tie between 448 and (NaN slot) 480: even
  EXPECT_EQ(encode<uint8_t>(std::nextafter(464.0f, INFINITY), t), 0x7F);  // beyond: NaN
  EXPECT_EQ(encode<uint8_t>(-std::nextafter(464.0f, INFINITY), t), 0xFF);
  EXPECT_EQ(encode<uint8_t>(std::nextafter(464.0f, INFINITY), t, true), 0x7E);
  EXPECT_EQ(encode<uint8_t>(-1e30f, t, true), 0xFE);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t), 0x7F);
  EXPECT_EQ(encode<uint8_t>(-INFINITY, t), 0xFF);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t, true), 0x7E);
  EXPECT_EQ(encode<uint8_t>(-INFINITY, t, true), 0xFE);
  EXPECT_EQ(encode<uint8_t>(NAN, t, true), 0x7F);
  EXPECT_EQ(encode<uint8_t>(-NAN, t), 0xFF);
  EXPECT_EQ(encode<uint8_t>(0x1p-9f, t), 0x01);   // min subnormal
  EXPECT_EQ(encode<uint8_t>(0x1p-10f, t), 0x00);  // tie to zero
  EXPECT_EQ(encode<uint8_t>(std::nextafter(0x1p-10f, 1.0f), t), 0x01);
  EXPECT_EQ(encode<uint8_t>(-0.0f, t), 0x80);
  EXPECT_TRUE(std::isnan(decode<uint8_t>(0x7F, t)));
  EXPECT_EQ(decode<uint8_t>(0x78, t), 256.0f);  // top binade is finite (no inf)
}

TEST(ConvertE5M2, OverflowAndSpecials) {
  const DType t = DType::kFloat8E5M2;
  EXPECT_EQ(encode<uint8_t>(57344.0f, t), 0x7B);
  EXPECT_EQ(encode<uint8_t>(61440.0f, t), 0x7C);  // tie with odd max: rounds to inf
  EXPECT_EQ(encode<uint8_t>(std::nextafter(61440.0f, 0.0f), t), 0x7B);
  EXPECT_EQ(encode<uint8_t>(61440.0f, t, true), 0x7B);
  EXPECT_EQ(encode<uint8_t>(-1e9f, t), 0xFC);
  EXPECT_EQ(encode<uint8_t>(-1e9f, t, true), 0xFB);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t), 0x7C);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t, true), 0x7B);
  EXPECT_EQ(encode<uint8_t>(NAN, t), 0x7E);
  EXPECT_EQ(encode<uint8_t>(0x1p-16f, t), 0x01);
  EXPECT_EQ(encode<uint8_t>(0x1p-17f, t), 0x00);
  EXPECT_TRUE(std::isinf(decode<uint8_t>(0xFC, t)));
}

TEST(ConvertHiFloat8, SpecCheckValues) {
  const DType t = DType::kHiFloat8;
  const std::pair<float, uint8_t> table[] = {
      {1.0f, 0x08},     {2.0f, 0x10},     {0.5f, 0x18},     {4.0f, 0x20},
      {16.0f, 0x40},    {256.0f, 0x60},   {0x1p-16f, 0x07}, {32768.0f, 0x6E},
      {0x1p-15f, 0x7E}, {0x1p-22f, 0x01}, {-1.0f, 0x88},    {-32768.0f, 0xEE},
  };
  for (const auto& [v, c] : table) {
    EXPECT_EQ(encode<uint8_t>(v, t), c) << v;
    EXPECT_EQ(decode<uint8_t>(c, t), v) << std::hex << int(c);
  }
  EXPECT_EQ(decode<uint8_t>(0x00, t), 0.0f);
  EXPECT_TRUE(std::isnan(decode<uint8_t>(0x80, t)));
  EXPECT_EQ(decode<uint8_t>(0x6F, t), INFINITY);
  EXPECT_EQ(decode<uint8_t>(0xEF, t), -INFINITY);
}

TEST(ConvertHiFloat8, OverflowUnderflowAndRounding) {
  const DType t = DType::kHiFloat8;
  // Overflow: a result above 32768, i.e. |x| >= 40960.
  EXPECT_EQ(encode<uint8_t>(40960.0f, t), 0x6F);
  EXPECT_EQ(encode<uint8_t>(-40960.0f, t), 0xEF);
  EXPECT_EQ(encode<uint8_t>(std::nextafter(40960.0f, 0.0f), t), 0x6E);
  EXPECT_EQ(encode<uint8_t>(40960.0f, t, true), 0x6E);
  EXPECT_EQ(encode<uint8_t>(-1e30f, t, true), 0xEE);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t), 0x6F);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t, true), 0x6E);
  EXPECT_EQ(encode<uint8_t>(NAN, t), 0x80);
  EXPECT_EQ(encode<uint8_t>(NAN, t, true), 0x80);
  // Underflow: [2^-23, 2^-22) rounds up to 2^-22; smaller to the only zero (no -0).
  EXPECT_EQ(encode<uint8_t>(0x1p-23f, t), 0x01);
  EXPECT_EQ(encode<uint8_t>(-0x1p-23f, t), 0x81);
  EXPECT_EQ(encode<uint8_t>(std::nextafter(0x1p-23f, 0.0f), t), 0x00);
  EXPECT_EQ(encode<uint8_t>(-std::nextafter(0x1p-23f, 0.0f), t), 0x00);
  EXPECT_EQ(encode<uint8_t>(-0.0f, t), 0x00);
  // Denormal band: powers of two, half away from zero; 1.5*2^-16 carries to min normal.
  EXPECT_EQ(encode<uint8_t>(1.5f * 0x1p-16f, t), 0x7E);
  EXPECT_EQ(encode<uint8_t>(1.5f * 0x1p-20f, t), 0x04);  // 2^-19
  EXPECT_EQ(encode<uint8_t>(std::nextafter(1.5f * 0x1p-20f, 0.0f), t), 0x03);
  // W fixed before rounding, carry bumps the exponent: 1.9375 -> 2.0.
  EXPECT_EQ(encode<uint8_t>(1.9375f, t), 0x10);
  EXPECT_EQ(encode<uint8_t>(1.0625f, t), 0x09);  // half away: 1.125
  EXPECT_EQ(encode<uint8_t>(18.0f, t), 0x41);    // W=2 band: 16*1.125 ties up to 20
  EXPECT_EQ(decode<uint8_t>(0x41, t), 20.0f);
}

TEST(ConvertE8M0, SpecValuesAndRules) {
  const DType t = DType::kFloat8E8M0;
  EXPECT_EQ(decode<uint8_t>(0x7F, t), 1.0f);
  EXPECT_EQ(decode<uint8_t>(0x00, t), 0x1p-127f);  // OCP: 0x00 is 2^-127, not zero
  EXPECT_EQ(decode<uint8_t>(0xFE, t), 0x1p127f);
  EXPECT_TRUE(std::isnan(decode<uint8_t>(0xFF, t)));
  EXPECT_EQ(encode<uint8_t>(1.5f, t), 0x80);
  EXPECT_EQ(encode<uint8_t>(std::nextafter(1.5f, 0.0f), t), 0x7F);
  EXPECT_EQ(encode<uint8_t>(0x1p127f, t), 0xFE);
  EXPECT_EQ(encode<uint8_t>(1.5f * 0x1p127f, t), 0xFF);
  EXPECT_EQ(encode<uint8_t>(1.5f * 0x1p127f, t, true), 0xFE);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t), 0xFF);
  EXPECT_EQ(encode<uint8_t>(INFINITY, t, true), 0xFE);
  EXPECT_EQ(encode<uint8_t>(0.0f, t), 0xFF);   // no zero in E8M0
  EXPECT_EQ(encode<uint8_t>(-4.0f, t), 0xFF);  // no sign
  EXPECT_EQ(encode<uint8_t>(NAN, t), 0xFF);
  EXPECT_EQ(encode<uint8_t>(from_bits(1), t), 0x00);           // below 2^-127: nearest code
  EXPECT_EQ(encode<uint8_t>(from_bits(0x00600000), t), 0x01);  // 1.5*2^-127 ties up
  EXPECT_EQ(encode<uint8_t>(from_bits(0x005FFFFF), t), 0x00);
}
