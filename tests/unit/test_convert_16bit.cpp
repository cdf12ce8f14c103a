// fp16 and bf16: all 65,536 codes through fp32 and back, every rounding midpoint between
// adjacent codes, overflow thresholds and NaN handling (SPEC §1).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/convert_ref.hpp"
#include "test_util.hpp"

using cftest::bits;
using cftest::from_bits;
using commfuse::DType;

namespace {

struct Fmt16 {
  DType dtype;
  float (*ref_decode)(uint16_t);
  uint16_t (*ref_encode)(float);
  uint16_t exp_mask;  // all-ones exponent field
  uint16_t quiet_bit;
};

const Fmt16 kF16{DType::kFloat16, commfuse::ref::f16_to_f32, commfuse::ref::f32_to_f16, 0x7C00,
                 0x0200};
const Fmt16 kBF16{DType::kBFloat16, commfuse::ref::bf16_to_f32, commfuse::ref::f32_to_bf16, 0x7F80,
                  0x0040};

bool is_nan_code(const Fmt16& f, uint16_t c) {
  return (c & f.exp_mask) == f.exp_mask && (c & ~(f.exp_mask | 0x8000)) != 0;
}

void check_all_codes(const Fmt16& f) {
  std::vector<uint16_t> codes(65536), back(65536);
  std::vector<float> vals(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  commfuse::convert(codes.data(), f.dtype, vals.data(), DType::kFloat32, codes.size());
  commfuse::convert(vals.data(), DType::kFloat32, back.data(), f.dtype, vals.size());
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto code = static_cast<uint16_t>(c);
    ASSERT_EQ(bits(vals[c]), bits(f.ref_decode(code))) << std::hex << c;
    if (is_nan_code(f, code)) {
      ASSERT_TRUE(std::isnan(vals[c])) << std::hex << c;
      // NaN stays NaN, keeps its sign and payload, and comes back quiet.
      ASSERT_EQ(back[c], code | f.quiet_bit) << std::hex << c;
    } else {
      ASSERT_EQ(back[c], code) << std::hex << c;
    }
    ASSERT_EQ(f.ref_encode(vals[c]), back[c]) << std::hex << c;
  }
}

// For each pair of adjacent positive finite codes (lo, lo+1): the fp32 midpoint rounds to
// the even one of the two; one fp32 ulp either side rounds to the nearer one.
void check_midpoints(const Fmt16& f, uint16_t max_finite) {
  std::vector<float> in;
  std::vector<uint16_t> want;
  for (uint32_t lo = 0; lo < max_finite; ++lo) {
    const double a = f.ref_decode(static_cast<uint16_t>(lo));
    const double b = f.ref_decode(static_cast<uint16_t>(lo + 1));
    const auto mid = static_cast<float>((a + b) / 2);  // exact: one more mantissa bit
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const uint16_t even = (lo & 1) ? static_cast<uint16_t>(lo + 1) : static_cast<uint16_t>(lo);
    for (const float sign : {1.0f, -1.0f}) {
      const uint16_t s = sign < 0 ? 0x8000 : 0;
      in.push_back(sign * mid);
      want.push_back(s | even);
      in.push_back(sign * std::nextafter(mid, 0.0f));
      want.push_back(s | static_cast<uint16_t>(lo));
      in.push_back(sign * std::nextafter(mid, INFINITY));
      want.push_back(s | static_cast<uint16_t>(lo + 1));
    }
  }
  std::vector<uint16_t> got(in.size());
  commfuse::convert(in.data(), DType::kFloat32, got.data(), f.dtype, in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "input " << in[i] << " bits " << std::hex << bits(in[i]);
    ASSERT_EQ(f.ref_encode(in[i]), want[i]) << "reference, input " << in[i];
  }
}

}  // namespace

TEST(ConvertF16, AllCodesRoundTrip) {
  check_all_codes(kF16);
}
TEST(ConvertBF16, AllCodesRoundTrip) {
  check_all_codes(kBF16);
}
TEST(ConvertF16, EveryRoundingMidpoint) {
  check_midpoints(kF16, 0x7BFF);
}
TEST(ConvertBF16, EveryRoundingMidpoint) {
  check_midpoints(kBF16, 0x7F7F);
}

TEST(ConvertF16, KnownValuesAndThresholds) {
  using cftest::encode;
  EXPECT_EQ(encode<uint16_t>(1.0f, DType::kFloat16), 0x3C00);
  EXPECT_EQ(encode<uint16_t>(-2.0f, DType::kFloat16), 0xC000);
  EXPECT_EQ(encode<uint16_t>(65504.0f, DType::kFloat16), 0x7BFF);
  // 65520 is the midpoint between 65504 (odd mantissa) and 65536 (= inf): rounds to inf.
  EXPECT_EQ(encode<uint16_t>(65520.0f, DType::kFloat16), 0x7C00);
  EXPECT_EQ(encode<uint16_t>(std::nextafter(65520.0f, 0.0f), DType::kFloat16), 0x7BFF);
  EXPECT_EQ(encode<uint16_t>(-1e9f, DType::kFloat16), 0xFC00);
  EXPECT_EQ(encode<uint16_t>(INFINITY, DType::kFloat16), 0x7C00);
  EXPECT_EQ(encode<uint16_t>(0x1p-24f, DType::kFloat16), 0x0001);
  EXPECT_EQ(encode<uint16_t>(0x1p-25f, DType::kFloat16), 0x0000);  // tie to even (zero)
  EXPECT_EQ(encode<uint16_t>(std::nextafter(0x1p-25f, 1.0f), DType::kFloat16), 0x0001);
  EXPECT_EQ(encode<uint16_t>(-0.0f, DType::kFloat16), 0x8000);
  EXPECT_EQ(encode<uint16_t>(from_bits(1), DType::kFloat16), 0x0000);  // fp32 subnormal
  EXPECT_EQ(encode<uint16_t>(NAN, DType::kFloat16), 0x7E00);
  EXPECT_EQ(encode<uint16_t>(-NAN, DType::kFloat16), 0xFE00);
  EXPECT_EQ(encode<uint16_t>(from_bits(0x7F800001), DType::kFloat16), 0x7E00);  // sNaN -> qNaN
}

TEST(ConvertBF16, KnownValuesAndThresholds) {
  using cftest::encode;
  EXPECT_EQ(encode<uint16_t>(1.0f, DType::kBFloat16), 0x3F80);
  EXPECT_EQ(encode<uint16_t>(from_bits(0x3F808000), DType::kBFloat16), 0x3F80);  // tie, even
  EXPECT_EQ(encode<uint16_t>(from_bits(0x3F818000), DType::kBFloat16), 0x3F82);  // tie, odd->up
  EXPECT_EQ(encode<uint16_t>(from_bits(0x7F7FFFFF), DType::kBFloat16), 0x7F80);  // overflow->inf
  EXPECT_EQ(encode<uint16_t>(from_bits(0x7F7F7FFF), DType::kBFloat16), 0x7F7F);
  EXPECT_EQ(encode<uint16_t>(from_bits(0x00008000), DType::kBFloat16), 0x0000);  // subnormal tie
  EXPECT_EQ(encode<uint16_t>(from_bits(0x00018000), DType::kBFloat16), 0x0002);
  EXPECT_EQ(encode<uint16_t>(NAN, DType::kBFloat16), 0x7FC0);
  EXPECT_EQ(encode<uint16_t>(from_bits(0xFF800001), DType::kBFloat16), 0xFFC0);  // sNaN -> qNaN
}
