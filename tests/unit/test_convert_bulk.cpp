// The bulk converters (what the hot paths use) agree bit for bit with the scalar reference
// over a structured sweep of fp32 inputs: every sign/exponent/top-mantissa pattern (16
// bits) combined with low-bit patterns around each format's rounding position.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/convert_fast.hpp"
#include "core/convert_ref.hpp"
#include "test_util.hpp"

using cftest::bits;
using commfuse::DType;

namespace {

std::vector<float> sweep_inputs() {
  // Low 16 bits: zero, all ones, and the patterns just below/at/above each rounding
  // position used by the formats (bf16 cuts at bit 16, fp16 at 13, fp8 at 20/21).
  const uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF,
                           0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000};
  std::vector<float> x;
  x.reserve(65536 * std::size(lows) + (1 << 20));
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : lows) x.push_back(cftest::from_bits((hi << 16) | lo));
  std::mt19937 rng(2026);
  for (int i = 0; i < (1 << 20); ++i) x.push_back(cftest::from_bits(static_cast<uint32_t>(rng())));
  return x;
}

const std::vector<float>& inputs() {
  static const std::vector<float> x = sweep_inputs();
  return x;
}

template <typename Code, typename Bulk, typename Ref>
void expect_agree(const char* name, Bulk bulk, Ref ref) {
  const auto& x = inputs();
  std::vector<Code> got(x.size());
  bulk(x.data(), got.data(), x.size());
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const Code want = ref(x[i]);
    if (got[i] != want && ++wrong <= 5)
      ADD_FAILURE() << name << ": input bits 0x" << std::hex << bits(x[i]) << " bulk 0x"
                    << static_cast<uint32_t>(got[i]) << " reference 0x"
                    << static_cast<uint32_t>(want);
  }
  EXPECT_EQ(wrong, 0u) << name << " over " << x.size() << " inputs";
}

}  // namespace

namespace fast = commfuse::fast;
namespace ref = commfuse::ref;

TEST(ConvertBulk, F16MatchesReference) {
  expect_agree<uint16_t>("f16", fast::f32_to_f16, ref::f32_to_f16);
}
TEST(ConvertBulk, BF16MatchesReference) {
  expect_agree<uint16_t>("bf16", fast::f32_to_bf16, ref::f32_to_bf16);
}
TEST(ConvertBulk, E4M3MatchesReferenceBothModes) {
  for (const bool sat : {false, true})
    expect_agree<uint8_t>(
        "e4m3fn", [&](const float* s, uint8_t* d, size_t n) { fast::f32_to_e4m3fn(s, d, n, sat); },
        [&](float v) { return ref::f32_to_e4m3fn(v, sat); });
}
TEST(ConvertBulk, E5M2MatchesReferenceBothModes) {
  for (const bool sat : {false, true})
    expect_agree<uint8_t>(
        "e5m2", [&](const float* s, uint8_t* d, size_t n) { fast::f32_to_e5m2(s, d, n, sat); },
        [&](float v) { return ref::f32_to_e5m2(v, sat); });
}
TEST(ConvertBulk, HiFloat8MatchesReferenceBothModes) {
  for (const bool sat : {false, true})
    expect_agree<uint8_t>(
        "hif8", [&](const float* s, uint8_t* d, size_t n) { fast::f32_to_hif8(s, d, n, sat); },
        [&](float v) { return ref::f32_to_hif8(v, sat); });
}
TEST(ConvertBulk, E8M0MatchesReferenceBothModes) {
  for (const bool sat : {false, true})
    expect_agree<uint8_t>(
        "e8m0", [&](const float* s, uint8_t* d, size_t n) { fast::f32_to_e8m0(s, d, n, sat); },
        [&](float v) { return ref::f32_to_e8m0(v, sat); });
}

TEST(ConvertBulk, ElementEncodersMatchArrayEncoders) {
  const auto& x = inputs();
  for (size_t i = 0; i < x.size(); i += 7) {
    const uint32_t b = bits(x[i]);
    ASSERT_EQ(fast::f32_to_bf16_one(b), ref::f32_to_bf16(x[i]));
    ASSERT_EQ(fast::f32_to_f16_one(b), ref::f32_to_f16(x[i]));
    ASSERT_EQ(fast::f32_to_e4m3fn_one(b, true), ref::f32_to_e4m3fn(x[i], true));
    ASSERT_EQ(fast::f32_to_e5m2_one(b, false), ref::f32_to_e5m2(x[i], false));
    ASSERT_EQ(fast::f32_to_hif8_one(b, false), ref::f32_to_hif8(x[i], false));
    ASSERT_EQ(fast::f32_to_e8m0_one(b, true), ref::f32_to_e8m0(x[i], true));
  }
}

TEST(ConvertBulk, DecodersMatchReferenceForAll16BitCodes) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  std::vector<float> f16(65536), bf16(65536);
  fast::f16_to_f32(codes.data(), f16.data(), codes.size());
  fast::bf16_to_f32(codes.data(), bf16.data(), codes.size());
  for (uint32_t c = 0; c < 65536; ++c) {
    ASSERT_EQ(bits(f16[c]), bits(ref::f16_to_f32(static_cast<uint16_t>(c)))) << std::hex << c;
    ASSERT_EQ(bits(bf16[c]), bits(ref::bf16_to_f32(static_cast<uint16_t>(c)))) << std::hex << c;
  }
}

// Lengths that are not a multiple of a vector (8): the tail after the last full vector
// goes through the scalar loop and must agree with the vector body and the reference.
TEST(ConvertBulk, F16TailsMatchReference) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c * 40503u);
  for (const size_t n : {size_t{1}, size_t{7}, size_t{13}, size_t{65535}}) {
    std::vector<float> f(n);
    fast::f16_to_f32(codes.data(), f.data(), n);
    std::vector<uint16_t> back(n);
    fast::f32_to_f16(f.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits(f[i]), bits(ref::f16_to_f32(codes[i]))) << n << " " << i;
      ASSERT_EQ(back[i], ref::f32_to_f16(f[i])) << n << " " << i;
    }
  }
}

// Any-to-any conversion goes through fp32 in blocks: lengths that are not a multiple of
// the block, and pairs of narrow formats, must give the same as two explicit steps.
TEST(ConvertBulk, AnyToAnyThroughFloat32InBlocks) {
  const DType narrow[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3FN,
                          DType::kFloat8E5M2, DType::kHiFloat8};
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 50.0f);
  const size_t n = 1237;
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  for (DType a : narrow)
    for (DType b : narrow) {
      std::vector<uint8_t> src(n * 2), direct(n * 2), via(n * 2);
      std::vector<float> tmp(n);
      commfuse::convert(x.data(), DType::kFloat32, src.data(), a, n, true);
      commfuse::convert(src.data(), a, direct.data(), b, n, true);
      commfuse::convert(src.data(), a, tmp.data(), DType::kFloat32, n);
      commfuse::convert(tmp.data(), DType::kFloat32, via.data(), b, n, true);
      EXPECT_EQ(direct, via) << commfuse::dtype_name(a) << " -> " << commfuse::dtype_name(b);
    }
}
