// quantize / dequantize (SPEC §5): codes are the nearest codes of x / scale, scales follow
// the rules of each mode, the layouts are the ones the ops take, dequantize is code·scale,
// special groups (all zero, NaN, inf) and every rejection.
#include <gtest/gtest.h>

#include <commfuse/commfuse.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/quant_per_token.hpp"
#include "test_util.hpp"

using commfuse::DType;
using commfuse::TensorView;

namespace {

float code_value(uint8_t c, DType t) {
  if (t == DType::kInt8) return static_cast<float>(static_cast<int8_t>(c));
  return cftest::decode(c, t);
}

// True when code c is a nearest finite code of v (ties either way).
bool nearest(float v, uint8_t c, DType t) {
  const double err = std::fabs(static_cast<double>(v) - code_value(c, t));
  for (int k = 0; k < 256; ++k) {
    const float cv = code_value(static_cast<uint8_t>(k), t);
    if (std::isfinite(cv) && std::fabs(static_cast<double>(v) - cv) < err) return false;
  }
  return true;
}

std::vector<float> sample(size_t n, uint32_t seed) {
  std::vector<float> x(n);
  uint32_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    // each group of 32 a different magnitude: 2^-10 .. 2^10
    const float mag = std::ldexp(1.0f, static_cast<int>((i / 32) % 21) - 10);
    x[i] = (static_cast<float>(s >> 8) / 8388608.0f - 1.0f) * mag;
  }
  return x;
}

float qmax(DType t) {
  return t == DType::kInt8           ? 127.0f
         : t == DType::kFloat8E4M3FN ? 448.0f
         : t == DType::kFloat8E5M2   ? 57344.0f
                                     : 15.0f;
}

}  // namespace

TEST(Quantize, PerTokenGroupCodesAreNearestAndDequantizeIsCodeTimesScale) {
  const int64_t rows = 3, h = 256;
  const std::vector<float> x = sample(static_cast<size_t>(rows * h), 7);
  for (DType t : {DType::kInt8, DType::kHiFloat8, DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    SCOPED_TRACE(std::string(commfuse::dtype_name(t)));
    std::vector<uint8_t> q(x.size());
    std::vector<float> sc(static_cast<size_t>(rows * h / 128)), back(x.size());
    commfuse::quantize(TensorView(x.data(), DType::kFloat32, {rows, h}), "per_token_group",
                       TensorView(q.data(), t, {rows, h}),
                       TensorView(sc.data(), DType::kFloat32, {rows, h / 128}));
    commfuse::dequantize(TensorView(q.data(), t, {rows, h}),
                         TensorView(sc.data(), DType::kFloat32, {rows, h / 128}), "per_token_group",
                         TensorView(back.data(), DType::kFloat32, {rows, h}));
    for (size_t g = 0; g < sc.size(); ++g) {
      float amax = 0;
      for (size_t i = g * 128; i < (g + 1) * 128; ++i) amax = std::max(amax, std::fabs(x[i]));
      EXPECT_EQ(sc[g], amax / qmax(t)) << "group " << g;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      const float s = sc[i / 128];
      const float v = x[i] / s;
      ASSERT_TRUE(nearest(v, q[i], t)) << "element " << i << " x/scale " << v << " code " << +q[i];
      ASSERT_EQ(cftest::bits(back[i]), cftest::bits(code_value(q[i], t) * s)) << i;
    }
  }
}

TEST(Quantize, MxSharedExponentAndLayout) {
  const int64_t rows = 2, h = 128;
  const std::vector<float> x = sample(static_cast<size_t>(rows * h), 11);
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    SCOPED_TRACE(std::string(commfuse::dtype_name(t)));
    const int emax = t == DType::kFloat8E4M3FN ? 8 : 15;
    std::vector<uint8_t> q(x.size()), sc(static_cast<size_t>(rows * h / 32));
    std::vector<uint16_t> back(x.size());
    commfuse::quantize(TensorView(x.data(), DType::kFloat32, {rows, h}), "mx",
                       TensorView(q.data(), t, {rows, h}),
                       TensorView(sc.data(), DType::kFloat8E8M0, {rows, h / 64, 2}), 32);
    commfuse::dequantize(TensorView(q.data(), t, {rows, h}),
                         TensorView(sc.data(), DType::kFloat8E8M0, {rows, h / 64, 2}), "mx",
                         TensorView(back.data(), DType::kBFloat16, {rows, h}));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t e = 0; e < h; ++e) {
        const size_t i = static_cast<size_t>(r * h + e);
        // SPEC §4's index: scale [h // 64, (h // 32) % 2] of the (H/64, 2) layout
        const uint8_t b = sc[static_cast<size_t>(r * (h / 64) * 2 + (e / 64) * 2 + (e / 32) % 2)];
        float amax = 0;
        for (int64_t k = e / 32 * 32; k < e / 32 * 32 + 32; ++k)
          amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * h + k)]));
        EXPECT_EQ(static_cast<int>(b) - 127, std::ilogb(amax) - emax);
        const float v = std::ldexp(x[i], 127 - b);
        ASSERT_TRUE(nearest(v, q[i], t)) << i;
        const float want = code_value(q[i], t) * std::ldexp(1.0f, b - 127);
        ASSERT_EQ(back[i], cftest::encode<uint16_t>(want, DType::kBFloat16)) << i;
      }
  }
}

TEST(Quantize, ZeroNanAndInfGroups) {
  const int64_t h = 128;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(2 * h, 0.0f);  // group 0 all zero; group 1: 2, -inf, inf, NaN, 1
  x[h] = 2.0f;
  x[h + 1] = -inf;
  x[h + 2] = inf;
  x[h + 3] = nan;
  x[h + 4] = 1.0f;
  struct Want {
    DType t;
    uint8_t pos_max, neg_max, nan_code;
  };
  for (const Want& w :
       {Want{DType::kInt8, 127, 0x81, 0}, Want{DType::kFloat8E4M3FN, 0x7E, 0xFE, 0x7F},
        Want{DType::kFloat8E5M2, 0x7B, 0xFB, 0x7E}, Want{DType::kHiFloat8, 0x6E, 0xEE, 0x80}}) {
    SCOPED_TRACE(std::string(commfuse::dtype_name(w.t)));
    std::vector<uint8_t> q(x.size(), 0xAA);
    float sc[2] = {-1, -1};
    commfuse::quantize(TensorView(x.data(), DType::kFloat32, {2, h}), "per_token_group",
                       TensorView(q.data(), w.t, {2, h}), TensorView(sc, DType::kFloat32, {2, 1}));
    EXPECT_EQ(sc[0], 1.0f);  // all-zero group: scale 1, zero codes
    for (int64_t i = 0; i < h; ++i) ASSERT_EQ(code_value(q[static_cast<size_t>(i)], w.t), 0.0f);
    EXPECT_EQ(sc[1], 2.0f / qmax(w.t));  // amax over the finite values
    EXPECT_EQ(q[h + 1], w.neg_max);      // ±inf saturate
    EXPECT_EQ(q[h + 2], w.pos_max);
    if (w.t == DType::kFloat8E5M2)
      EXPECT_TRUE(std::isnan(code_value(q[h + 3], w.t)));
    else
      EXPECT_EQ(q[h + 3], w.nan_code);  // NaN stays NaN (int8: 0)
  }
  // MX: an all-zero group gets scale byte 0x00 and zero codes.
  std::vector<uint8_t> q(2 * h), sc(2 * h / 32, 0xAA);
  commfuse::quantize(TensorView(x.data(), DType::kFloat32, {2, h}), "mx",
                     TensorView(q.data(), DType::kFloat8E4M3FN, {2, h}),
                     TensorView(sc.data(), DType::kFloat8E8M0, {2, 2, 2}));
  for (int g = 0; g < 4; ++g) EXPECT_EQ(sc[static_cast<size_t>(g)], 0x00) << g;
  for (int64_t i = 0; i < h; ++i) EXPECT_EQ(q[static_cast<size_t>(i)], 0x00);
  EXPECT_EQ(sc[4], 127 + 1 - 8);  // amax 2 (finite values): floor(log2 2) - 8
  EXPECT_EQ(q[h + 2], 0x7E);
}

// Exact ties round half to even (nearest() above accepts either code): a group with amax
// 127 has scale 1, so 2.5, 3.5 and -2.5 are the codes' ties themselves.
TEST(Quantize, PerTokenGroupInt8TiesRoundToEven) {
  const int64_t h = 128;
  std::vector<float> x(h, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = -0.0f;
  x[5] = 126.5f;
  std::vector<int8_t> q(h, 99);
  float sc = 0;
  commfuse::quantize(TensorView(x.data(), DType::kFloat32, {1, h}), "per_token_group",
                     TensorView(q.data(), DType::kInt8, {1, h}),
                     TensorView(&sc, DType::kFloat32, {1, 1}));
  EXPECT_EQ(sc, 1.0f);
  EXPECT_EQ(q[1], 2);
  EXPECT_EQ(q[2], 4);
  EXPECT_EQ(q[3], -2);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(q[5], 126);
}

// MX at the ends of the exponent range, against the rule written out with ldexp: a group
// of subnormal-scale values (the shared exponent clamped to -127, scale byte 0), a group
// spanning 3e38 to 2^-58 (codes that underflow to zero or to e4m3's subnormals), and -0.0.
TEST(Quantize, MxExponentRangeEnds) {
  const int64_t h = 64;
  std::vector<float> x(h, 0.0f);
  for (int i = 0; i < 32; ++i) x[i] = std::ldexp(1.0f + i / 32.0f, -130) * (i % 2 ? -1 : 1);
  x[32] = 3e38f;
  x[33] = 1e-30f;
  x[34] = std::ldexp(1.5f, -58);
  x[35] = -0.0f;
  x[36] = std::ldexp(1.0f, 117);  // e4m3 subnormal after scaling by 2^-119
  x[37] = -std::ldexp(1.75f, 113);
  std::vector<uint8_t> q(h), sc(h / 32);
  commfuse::quantize(TensorView(x.data(), DType::kFloat32, {1, h}), "mx",
                     TensorView(q.data(), DType::kFloat8E4M3FN, {1, h}),
                     TensorView(sc.data(), DType::kFloat8E8M0, {1, 1, 2}));
  EXPECT_EQ(sc[0], 0);              // floor(log2 amax) - 8 < -127: clamped
  EXPECT_EQ(sc[1], 127 + 127 - 8);  // amax 3e38: floor(log2) = 127
  for (int64_t i = 0; i < h; ++i) {
    const int e = static_cast<int>(sc[static_cast<size_t>(i / 32)]) - 127;
    const uint8_t want = cftest::encode<uint8_t>(std::ldexp(x[static_cast<size_t>(i)], -e),
                                                 DType::kFloat8E4M3FN, true);
    ASSERT_EQ(q[static_cast<size_t>(i)], want) << "element " << i;
  }
  EXPECT_EQ(q[35], 0x80);  // -0.0 keeps its sign
}

TEST(Quantize, Rejections) {
  std::vector<float> x(256);
  std::vector<uint8_t> q(256);
  std::vector<float> sc(2);
  const TensorView xv(x.data(), DType::kFloat32, {1, 256}), qv(q.data(), DType::kInt8, {1, 256}),
      sv(sc.data(), DType::kFloat32, {1, 2});
  auto expect_invalid = [](const std::function<void()>& f, const char* needle) {
    try {
      f();
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const commfuse::InvalidArgument& e) {
      EXPECT_NE(std::strstr(e.what(), needle), nullptr) << e.what();
    }
  };
  expect_invalid([&] { commfuse::quantize(xv, "per_token", qv, sv); },
                 "scales must have x's leading dims");
  expect_invalid([&] { commfuse::quantize(xv, "blockwise", qv, sv); }, "mode is 'blockwise'");
  expect_invalid([&] { commfuse::quantize(xv, "per_token_group", qv, sv, 64); },
                 "group_size is 64");
  expect_invalid([&] { commfuse::quantize(xv, "mx", qv, sv); },
                 "q dtype is int8 but mode mx takes");
  expect_invalid(
      [&] {
        commfuse::quantize(xv, "per_token_group", qv,
                           TensorView(sc.data(), DType::kFloat32, {1, 3}));
      },
      "scales shape is (1, 3)");
  expect_invalid(
      [&] {
        commfuse::quantize(TensorView(x.data(), DType::kFloat32, {2, 100}), "per_token_group",
                           TensorView(q.data(), DType::kInt8, {2, 100}), sv);
      },
      "x dim 1 (H) is 100");
  expect_invalid(
      [&] {
        commfuse::quantize(xv, "per_token_group", TensorView(q.data(), DType::kInt8, {2, 128}), sv);
      },
      "q shape is (2, 128)");
  expect_invalid(
      [&] {
        commfuse::quantize(TensorView(q.data(), DType::kInt8, {1, 256}), "per_token_group", qv, sv);
      },
      "x dtype is int8");
  expect_invalid(
      [&] {
        commfuse::dequantize(qv, sv, "per_token_group",
                             TensorView(x.data(), DType::kInt32, {1, 256}));
      },
      "output dtype is int32");
  // Outputs sharing bytes with an input: dequantize's output starting inside q was read back
  // as codes after it had been written (wrong values, silently).
  std::vector<uint8_t> buf(4096);
  std::vector<float> s4(4, 1.0f);
  const TensorView q4(buf.data(), DType::kInt8, {4, 128}), s4v(s4.data(), DType::kFloat32, {4, 1});
  for (const char* mode : {"per_token_group", "per_token"})
    expect_invalid(
        [&] {
          commfuse::dequantize(q4, s4v, mode,
                               TensorView(buf.data() + 128, DType::kFloat32, {4, 128}));
        },
        "dequantize: output and q share memory");
  expect_invalid(
      [&] {
        commfuse::quantize(TensorView(buf.data(), DType::kFloat32, {4, 128}), "per_token_group",
                           TensorView(buf.data() + 1024, DType::kInt8, {4, 128}), s4v);
      },
      "quantize: q and x share memory");
  expect_invalid(
      [&] {
        commfuse::quantize(xv, "per_token_group", qv,
                           TensorView(q.data() + 8, DType::kFloat32, {1, 2}));
      },
      "quantize: scales and q share memory");
  try {
    commfuse::quantize(TensorView(), "mx", qv, sv);
    ADD_FAILURE() << "null x accepted";
  } catch (const commfuse::NullPointerError& e) {
    EXPECT_NE(std::strstr(e.what(), "quantize: x is null"), nullptr) << e.what();
  }
}

TEST(Quantize, CApiMatchesCpp) {
  const std::vector<float> x = sample(256, 3);
  std::vector<uint8_t> q(256), q2(256);
  std::vector<float> sc(2), sc2(2), back(256);
  commfuse::quantize(TensorView(x.data(), DType::kFloat32, {1, 256}), "per_token_group",
                     TensorView(q.data(), DType::kHiFloat8, {1, 256}),
                     TensorView(sc.data(), DType::kFloat32, {1, 2}));
  const int64_t xs[] = {1, 256}, ss[] = {1, 2};
  commfuseTensor_t* tx =
      commfuseCreateTensor(xs, 2, nullptr, COMMFUSE_FLOAT32, const_cast<float*>(x.data()));
  commfuseTensor_t* tq = commfuseCreateTensor(xs, 2, nullptr, COMMFUSE_HIFLOAT8, q2.data());
  commfuseTensor_t* ts = commfuseCreateTensor(ss, 2, nullptr, COMMFUSE_FLOAT32, sc2.data());
  commfuseTensor_t* tb = commfuseCreateTensor(xs, 2, nullptr, COMMFUSE_FLOAT32, back.data());
  EXPECT_EQ(commfuseQuantize(tx, "per_token_group", 0, tq, ts), COMMFUSE_SUCCESS)
      << commfuseGetLastErrorMessage();
  EXPECT_EQ(q, q2);
  EXPECT_EQ(sc, sc2);
  EXPECT_EQ(commfuseDequantize(tq, ts, "per_token_group", 128, tb), COMMFUSE_SUCCESS);
  for (size_t i = 0; i < 256; ++i)
    EXPECT_EQ(back[i], code_value(q[i], DType::kHiFloat8) * sc[i / 128]);
  EXPECT_EQ(commfuseQuantize(tx, "per_token", 0, tq, ts), COMMFUSE_PARAM_INVALID);  // hifloat8 q
  EXPECT_EQ(commfuseQuantize(tx, nullptr, 0, tq, ts), COMMFUSE_PARAM_NULLPTR);
  for (auto* t : {tx, tq, ts, tb}) commfuseDestroyTensor(t);
}

// mode per_token (SPEC §5, the §3 quantizer): codes and scales are the per-token kernel's
// (itself pinned against a scalar reference in test_quant_per_token.cpp), int4 packed in
// pairs, and dequantize is exactly code · scale; a zero row gives zeros and scale 0.
TEST(Quantize, PerTokenInt8AndInt4) {
  const int64_t rows = 3, h = 64;
  std::vector<float> x(static_cast<size_t>(rows * h));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = i < static_cast<size_t>(h) ? 0.0f : static_cast<float>((i * 37) % 101) / 7.0f - 7.0f;
  for (DType qt : {DType::kInt8, DType::kInt4}) {
    const int qmax = qt == DType::kInt8 ? 127 : 7;
    std::vector<uint8_t> q(commfuse::dtype_storage_bytes(qt, x.size()));
    std::vector<float> sc(rows), back(x.size());
    const TensorView xv(x.data(), DType::kFloat32, {rows, h}), qv(q.data(), qt, {rows, h}),
        sv(sc.data(), DType::kFloat32, {rows}), bv(back.data(), DType::kFloat32, {rows, h});
    commfuse::quantize(xv, "per_token", qv, sv);
    std::vector<int8_t> codes(x.size());
    if (qt == DType::kInt8)
      std::memcpy(codes.data(), q.data(), codes.size());
    else
      commfuse::unpack_int4(q.data(), codes.data(), codes.size());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int8_t> want(static_cast<size_t>(h));
      const float ws = commfuse::kernels::cpu::quantize_row_per_token(
          x.data() + r * h, static_cast<size_t>(h), qmax, want.data());
      EXPECT_EQ(sc[static_cast<size_t>(r)], ws) << "row " << r;
      EXPECT_EQ(std::memcmp(want.data(), codes.data() + r * h, static_cast<size_t>(h)), 0)
          << "row " << r;
    }
    EXPECT_EQ(sc[0], 0.0f);  // the all-zero row
    commfuse::dequantize(qv, sv, "per_token", bv);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(back[i], static_cast<float>(codes[i]) * sc[i / static_cast<size_t>(h)]) << i;
      EXPECT_LE(std::fabs(back[i] - x[i]), sc[i / static_cast<size_t>(h)] / 2 + 1e-6f) << i;
    }
  }
  // int4 needs an even H; scales must be float32 with one value per row.
  std::vector<float> x3(9);
  std::vector<uint8_t> q3(8);
  std::vector<float> s3(3);
  EXPECT_THROW(commfuse::quantize(TensorView(x3.data(), DType::kFloat32, {3, 3}), "per_token",
                                  TensorView(q3.data(), DType::kInt4, {3, 3}),
                                  TensorView(s3.data(), DType::kFloat32, {3})),
               commfuse::InvalidArgument);
  EXPECT_THROW(commfuse::quantize(TensorView(x3.data(), DType::kFloat32, {3, 3}), "per_token",
                                  TensorView(q3.data(), DType::kInt8, {3, 3}),
                                  TensorView(s3.data(), DType::kFloat32, {1, 3})),
               commfuse::InvalidArgument);
}
