// The per-token quantizer and the integer GEMM against straightforward references.
//
// quantize_per_token: q and s bit for bit against a scalar transcription of SPEC §3 (fp32
// amax, Q / amax once per row, one multiply, round half to even, clamp), on random rows,
// exact ties (x.5 after scaling), all-zero rows, NaN, int8 and int4 Q.
// int_matmul: every path equal to the exact int64 sum, at the extreme values that make
// oneDNN's non-VNNI int8 kernel saturate, and with k longer than one exact fp32 block.
#include <gtest/gtest.h>

#include <commfuse/commfuse.hpp>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/int_matmul.hpp"
#include "kernels/cpu/madd16_gemm.hpp"
#include "kernels/cpu/quant_per_token.hpp"
#include "kernels/cpu/small_m_int_gemm.hpp"
#include "ops/alltoall_quant_matmul/row_kernels.hpp"

namespace cpu = commfuse::kernels::cpu;

namespace {

float ref_row(const std::vector<float>& v, int Q, std::vector<int8_t>& q) {
  float amax = 0.0f;
  for (float x : v)
    if (std::fabs(x) > amax) amax = std::fabs(x);
  q.assign(v.size(), 0);
  if (amax == 0.0f) return 0.0f;
  const float inv = static_cast<float>(Q) / amax;
  for (size_t i = 0; i < v.size(); ++i) {
    const float t = v[i] * inv;
    if (std::isnan(t)) continue;
    float r = std::nearbyint(t);
    if (r > Q) r = static_cast<float>(Q);
    if (r < -Q) r = static_cast<float>(-Q);
    q[i] = static_cast<int8_t>(r);
  }
  return amax / static_cast<float>(Q);
}

void expect_same(const std::vector<float>& v, int Q) {
  std::vector<int8_t> want, got(v.size());
  const float ws = ref_row(v, Q, want);
  const float gs = cpu::quantize_row_per_token(v.data(), v.size(), Q, got.data());
  EXPECT_EQ(std::memcmp(&ws, &gs, sizeof(float)), 0) << ws << " vs " << gs;
  EXPECT_EQ(want, got);
}

}  // namespace

TEST(QuantPerToken, RandomRowsMatchReferenceBitwise) {
  std::mt19937 g(7);
  for (int Q : {cpu::kInt8QuantMax, cpu::kInt4QuantMax})
    for (int len : {1, 2, 7, 31, 64, 257, 1000}) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<float> v(static_cast<size_t>(len));
        std::normal_distribution<float> d(0.0f, rep % 2 ? 1e-3f : 3.0f);
        for (float& x : v) x = d(g);
        expect_same(v, Q);
      }
    }
}

TEST(QuantPerToken, TiesRoundHalfToEven) {
  // amax = Q makes the scale 1: v * (Q / amax) = v exactly, so x.5 values are exact ties.
  for (int Q : {127, 7}) {
    std::vector<float> v = {static_cast<float>(Q), 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f};
    std::vector<int8_t> q(v.size());
    const float s = cpu::quantize_row_per_token(v.data(), v.size(), Q, q.data());
    EXPECT_EQ(s, 1.0f);
    const std::vector<int8_t> want = {static_cast<int8_t>(Q), 0, 2, 2, 0, -2, -2, 4};
    EXPECT_EQ(q, want);
    expect_same(v, Q);
  }
}

// The ties go to even whatever rounding mode the host program set (std::nearbyint follows
// it: under FE_UPWARD 2.5 became 3), and the program's mode is left as it was.
TEST(QuantPerToken, TiesRoundHalfToEvenInAnyRoundingMode) {
  for (const int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    std::vector<float> v = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f};
    std::vector<int8_t> q(v.size());
    cpu::quantize_row_per_token(v.data(), v.size(), 127, q.data());
    std::vector<int8_t> c8(v.size());
    std::vector<int32_t> c32(v.size());
    std::vector<int64_t> c64(v.size());
    commfuse::convert(v.data(), commfuse::DType::kFloat32, c8.data(), commfuse::DType::kInt8,
                      v.size());
    commfuse::convert(v.data(), commfuse::DType::kFloat32, c32.data(), commfuse::DType::kInt32,
                      v.size());
    commfuse::convert(v.data(), commfuse::DType::kFloat32, c64.data(), commfuse::DType::kInt64,
                      v.size());
    EXPECT_EQ(std::fegetround(), mode) << "the caller's rounding mode was not restored";
    std::fesetround(FE_TONEAREST);
    const std::vector<int8_t> want = {127, 0, 2, 2, 0, -2, -2, 4};
    EXPECT_EQ(q, want) << "quantize_row_per_token, mode " << mode;
    EXPECT_EQ(c8, want) << "convert to int8, mode " << mode;
    EXPECT_EQ(c32, std::vector<int32_t>(want.begin(), want.end())) << "int32, mode " << mode;
    EXPECT_EQ(c64, std::vector<int64_t>(want.begin(), want.end())) << "int64, mode " << mode;
  }
}

// The same for the quantize API's fp32 arithmetic (code times scale, rounded once): the
// dequantized values of a directed mode were the product rounded up (or down).
TEST(QuantPerToken, DequantizeIsTheSameInAnyRoundingMode) {
  const int64_t rows = 4, h = 64;
  std::vector<int8_t> q(rows * h);
  std::vector<float> scales(rows);
  for (int64_t i = 0; i < rows * h; ++i) q[i] = static_cast<int8_t>((i * 37) % 255 - 127);
  for (int64_t r = 0; r < rows; ++r) scales[r] = 0.1f + 0.013f * static_cast<float>(r);
  auto dequant = [&] {
    std::vector<float> out(rows * h);
    commfuse::dequantize(commfuse::TensorView(q.data(), commfuse::DType::kInt8, {rows, h}),
                         commfuse::TensorView(scales.data(), commfuse::DType::kFloat32, {rows}),
                         "per_token",
                         commfuse::TensorView(out.data(), commfuse::DType::kFloat32, {rows, h}));
    return out;
  };
  const std::vector<float> nearest = dequant();
  for (const int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    const std::vector<float> got = dequant();
    std::fesetround(FE_TONEAREST);
    EXPECT_TRUE(got == nearest) << "mode " << mode;
  }
}

#if defined(__x86_64__)
// A caller's flush-to-zero and denormals-are-zero (torch.set_flush_denormal(True)) do not
// change results either: the MX scale code 0x00 is 2^-127, a subnormal fp32, which DAZ read
// as 0 (e4m3 448 times it is 1.75 * 2^-119, a normal float). The caller's MXCSR is restored.
TEST(QuantPerToken, DequantizeKeepsSubnormalScalesUnderFtzAndDaz) {
  std::vector<uint8_t> q(64, 0x7E), scales(2, 0x00);
  std::vector<float> out(64, -1.0f);
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ (bit 15) and DAZ (bit 6)
  commfuse::dequantize(commfuse::TensorView(q.data(), commfuse::DType::kFloat8E4M3FN, {1, 64}),
                       commfuse::TensorView(scales.data(), commfuse::DType::kFloat8E8M0, {1, 1, 2}),
                       "mx", commfuse::TensorView(out.data(), commfuse::DType::kFloat32, {1, 64}));
  const unsigned after = _mm_getcsr();
  _mm_setcsr(saved);
  EXPECT_EQ(after & 0x8040, 0x8040u) << "the caller's FTZ/DAZ were not restored";
  EXPECT_EQ(out[0], std::ldexp(1.75f, -119));
  EXPECT_EQ(out[63], std::ldexp(1.75f, -119));
}
#endif

TEST(QuantPerToken, ZeroRowGivesZerosAndScaleZero) {
  std::vector<float> v(33, 0.0f);
  v[3] = -0.0f;
  std::vector<int8_t> q(v.size(), 99);
  EXPECT_EQ(cpu::quantize_row_per_token(v.data(), v.size(), 127, q.data()), 0.0f);
  for (int8_t x : q) EXPECT_EQ(x, 0);
}

TEST(QuantPerToken, NaNElementsGiveZeroAndDoNotSetTheScale) {
  std::vector<float> v = {1.0f, std::numeric_limits<float>::quiet_NaN(), -2.0f};
  std::vector<int8_t> q(3);
  EXPECT_EQ(cpu::quantize_row_per_token(v.data(), 3, 127, q.data()), 2.0f / 127.0f);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], -127);
  expect_same(v, 127);
}

// abs_max over rows longer than its 32 lanes, with NaNs and the maximum in every lane
// position and in the scalar tail: the same value as one running maximum that skips NaN.
TEST(QuantPerToken, AbsMaxOverManyLanesSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const size_t n : {size_t{31}, size_t{32}, size_t{33}, size_t{100}, size_t{4099}})
    for (size_t at = 0; at < n; at += (n > 200 ? 97 : 1)) {
      std::vector<float> v(n), s(n, 1.0f);
      for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i)) * 3.0f;
      for (size_t i = 5; i < n; i += 7) v[i] = nan;
      v[at] = at % 2 ? -1000.0f : 1000.0f;  // also where a NaN was
      float want = 0.0f;
      for (float x : v)
        if (std::fabs(x) > want) want = std::fabs(x);
      ASSERT_EQ(cpu::abs_max(v.data(), n), want) << "n " << n << " max at " << at;
      std::vector<float> w = v;
      ASSERT_EQ(commfuse::ops::a2aq::mul_abs_max(w.data(), s.data(), n), want)
          << "n " << n << " max at " << at;
    }
}

TEST(QuantPerToken, RowsAndScales) {
  const int64_t rows = 5, cols = 40;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * (1 + i % 5);
  std::vector<int8_t> q(x.size());
  std::vector<float> s(rows);
  cpu::quantize_per_token(x.data(), rows, cols, 127, q.data(), s.data());
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
    std::vector<int8_t> want;
    EXPECT_EQ(ref_row(row, 127, want), s[r]);
    EXPECT_EQ(std::vector<int8_t>(q.begin() + r * cols, q.begin() + (r + 1) * cols), want);
  }
}

namespace {

// c = a @ b through int_matmul against int64 sums.
// force: run want_path instead of the machine's choice.
// packed: ask for b in the kernel's blocked layout (IntMatmulDesc::b_packed).
void check_int_matmul(int64_t m, int64_t k, int64_t n, bool bt, int a_max, int b_max, bool extreme,
                      cpu::IntMatmulPath want_path, bool force = false, bool packed = false,
                      int64_t pad = 0) {
  std::mt19937 g(static_cast<unsigned>(m * 131 + k * 7 + n + bt));
  // Row strides `pad` wider than the rows (a, b in either layout, c); the padding holds
  // values that must not be read, and c's must not be written.
  const int64_t lda = k + pad, ldb = (bt ? k : n) + pad, ldc = n + pad;
  const int64_t b_rows = bt ? n : k;
  std::vector<int8_t> a(static_cast<size_t>(m * lda), 99), b(static_cast<size_t>(b_rows * ldb), 99);
  // Values in [-mx, min(mx, 127)]: a bound of 128 means -128 may occur (int8 has no +128);
  // extreme: only the two ends.
  auto fill = [&](std::vector<int8_t>& v, int64_t rows, int64_t cols, int64_t ld, int mx) {
    const int hi = std::min(mx, 127);
    std::uniform_int_distribution<int> d(-mx, hi);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        const int x = d(g);
        v[static_cast<size_t>(r * ld + j)] = static_cast<int8_t>(extreme ? (x >= 0 ? hi : -mx) : x);
      }
  };
  fill(a, m, k, lda, a_max);
  fill(b, b_rows, bt ? k : n, ldb, b_max);
  cpu::IntMatmulDesc d;
  d.m = m;
  d.k = k;
  d.n = n;
  d.lda = lda;
  d.ldb = ldb;
  d.ldc = ldc;
  d.b_transposed = bt;
  d.a_max = a_max;
  d.b_max = b_max;
  if (force) d.force_path = want_path;
  d.b_packed = packed;
  const auto plan = cpu::plan_int_matmul(d);
  if (cpu::reads_packed_b(*plan)) {
    EXPECT_GT(cpu::prepared_b_bytes(*plan), 0u);
  }
  if (!packed) {
    EXPECT_FALSE(cpu::reads_packed_b(*plan));
  }
  EXPECT_EQ(cpu::path_of(*plan), want_path) << cpu::describe(*plan);
  std::vector<float> prepared(cpu::prepared_b_bytes(*plan) / sizeof(float) + 1);
  cpu::prepare_b(*plan, b.data(), prepared.data());
  const void* bp =
      cpu::prepared_b_bytes(*plan) ? static_cast<const void*>(prepared.data()) : b.data();
  std::vector<int32_t> c(static_cast<size_t>(m * ldc), 12345);
  cpu::int_matmul(*plan, a.data(), bp, c.data());
  int64_t bad = 0, touched = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t r = 0;
      for (int64_t p = 0; p < k; ++p)
        r += int64_t{a[i * lda + p]} * b[bt ? j * ldb + p : p * ldb + j];
      bad += r != c[i * ldc + j];
    }
    for (int64_t j = n; j < ldc; ++j) touched += c[i * ldc + j] != 12345;
  }
  EXPECT_EQ(bad, 0) << cpu::describe(*plan);
  EXPECT_EQ(touched, 0) << "c's padding was written: " << cpu::describe(*plan);
}

// plan_int_matmul(d) must refuse d's force_path: PARAM_INVALID naming force_path.
void expect_forced_path_rejected(const cpu::IntMatmulDesc& d, const char* accepted) {
  try {
    cpu::plan_int_matmul(d);
    ADD_FAILURE() << accepted;
  } catch (const commfuse::Error& e) {
    EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid);
    EXPECT_NE(std::string(e.what()).find("force_path"), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(IntMatmul, PathChoice) {
  // Without int32 accumulation (AVX2's vpmaddubsw) only int4-sized operands may use s8;
  // the others take the exact path given.
  const auto f32 = cpu::IntMatmulPath::kF32Blocked, madd = cpu::IntMatmulPath::kMadd16;
  EXPECT_EQ(cpu::choose_int_matmul_path(127, 128, false, f32), f32);
  EXPECT_EQ(cpu::choose_int_matmul_path(127, 128, false, madd), madd);
  EXPECT_EQ(cpu::choose_int_matmul_path(127, 65, false, f32), f32);
  EXPECT_EQ(cpu::choose_int_matmul_path(127, 64, false, f32),
            cpu::IntMatmulPath::kS8);  // 2*255*64 fits
  EXPECT_EQ(cpu::choose_int_matmul_path(7, 8, false, madd), cpu::IntMatmulPath::kS8);
  EXPECT_EQ(cpu::choose_int_matmul_path(8, 8, false, f32), cpu::IntMatmulPath::kS8);
  // With it (VNNI, AMX) every int8 operand does.
  EXPECT_EQ(cpu::choose_int_matmul_path(127, 128, true, f32), cpu::IntMatmulPath::kS8);
  EXPECT_EQ(cpu::choose_int_matmul_path(8, 8, true, madd), cpu::IntMatmulPath::kS8);
  // This machine's answer follows from its (capped) features and its probe, never from a
  // constant; the probe picks madd16 only where AVX2 is allowed.
  const bool int32 = cpu::s8_gemm_accumulates_in_int32();
  const cpu::IntMatmulPath exact = cpu::exact_int_matmul_path();
  EXPECT_EQ(cpu::choose_int_matmul_path(127, 127),
            cpu::choose_int_matmul_path(127, 127, int32, exact));
  if (!cpu::madd16_available()) {
    EXPECT_EQ(exact, f32);
  }
  EXPECT_NE(exact, cpu::IntMatmulPath::kS8);
}

TEST(IntMatmul, ForcingMadd16WithoutAvx2IsRejected) {
  cpu::IntMatmulDesc d;
  d.m = d.k = d.n = d.lda = d.ldb = d.ldc = 4;
  d.force_path = cpu::IntMatmulPath::kMadd16;
  if (cpu::madd16_available()) {
    EXPECT_EQ(cpu::path_of(*cpu::plan_int_matmul(d)), cpu::IntMatmulPath::kMadd16);
    return;
  }
  expect_forced_path_rejected(d, "forcing avx2-madd16 without AVX2 was accepted");
}

TEST(IntMatmul, Int32AccumulationNeedsVnniOrAmxUnderTheCap) {
  const commfuse::cpu::Features& f = commfuse::cpu::features();
  if (cpu::s8_gemm_accumulates_in_int32()) {
    EXPECT_TRUE(f.avx512_vnni || f.avx_vnni || f.amx_int8) << commfuse::cpu::describe(f);
  }
  if (!(f.avx512_vnni || f.avx_vnni || f.amx_int8)) {
    EXPECT_FALSE(cpu::s8_gemm_accumulates_in_int32()) << commfuse::cpu::describe(f);
  }
}

TEST(IntMatmul, Int8IsExactIncludingSaturatingValues) {
  // Whichever path this CPU takes for int8 x int8 must be exact at the saturating extremes.
  const cpu::IntMatmulPath want = cpu::choose_int_matmul_path(127, 127);
  for (bool bt : {false, true})
    for (bool extreme : {false, true}) {
      check_int_matmul(9, 40, 11, bt, 127, 127, extreme, want);
      // k > 1040: several exact fp32 blocks summed in int32 (on the f32-blocked path).
      check_int_matmul(3, 2500, 5, bt, 127, 127, extreme, want);
    }
}

TEST(IntMatmul, EveryExactInt8PathIsExact) {
  // Each path exact for int8 x int8 on this CPU, forced in turn, so a VNNI/AMX machine also
  // checks the f32-blocked path it never chooses. b_max 128 puts -128 in b (extreme: every
  // product at +-127 x +-128); k > 1040 sums several exact fp32 blocks.
  std::vector<cpu::IntMatmulPath> paths{cpu::IntMatmulPath::kF32Blocked};
  if (cpu::choose_int_matmul_path(127, 128) == cpu::IntMatmulPath::kS8)
    paths.push_back(cpu::IntMatmulPath::kS8);
  if (cpu::madd16_available()) paths.push_back(cpu::IntMatmulPath::kMadd16);
  for (cpu::IntMatmulPath path : paths)
    for (bool bt : {false, true})
      for (bool extreme : {false, true}) {
        check_int_matmul(9, 40, 11, bt, 127, 128, extreme, path, true);
        check_int_matmul(3, 2500, 5, bt, 127, 128, extreme, path, true);
        check_int_matmul(6, 35, 40, bt, 127, 128, extreme, path, true, false, 7);  // strides
      }
}

TEST(IntMatmul, Madd16EdgesAreExact) {
  // The int16 kernel's tiles: m not a multiple of its 4 rows or 64-row blocks, n with a tail
  // below its 16-column panels and across its column blocks, odd k (the last k paired with
  // 0) and k across its 512-k blocks, both layouts, the int8 extremes. Where this CPU (as capped)
  // lacks AVX2 the path cannot be forced (ForcingMadd16WithoutAvx2IsRejected): that is the check
  // there.
  if (!cpu::madd16_available()) GTEST_SKIP() << "no AVX2 under the cap";
  for (bool bt : {false, true})
    for (bool extreme : {false, true}) {
      check_int_matmul(1, 1, 1, bt, 127, 128, extreme, cpu::IntMatmulPath::kMadd16, true);
      check_int_matmul(5, 33, 17, bt, 127, 128, extreme, cpu::IntMatmulPath::kMadd16, true);
      check_int_matmul(67, 1025, 48, bt, 127, 128, extreme, cpu::IntMatmulPath::kMadd16, true);
      check_int_matmul(130, 600, 31, bt, 127, 128, extreme, cpu::IntMatmulPath::kMadd16, true);
      // Several column blocks (half of L2 each: 1024 columns on a 2 MiB L2), alone and with
      // several k blocks each.
      check_int_matmul(3, 40, 4100, bt, 127, 128, extreme, cpu::IntMatmulPath::kMadd16, true);
      check_int_matmul(5, 1025, 2100, bt, 127, 128, extreme, cpu::IntMatmulPath::kMadd16, true);
      // Row strides wider than the rows (a, b, c), and a = -128 (a bound of 128).
      check_int_matmul(6, 35, 40, bt, 128, 128, extreme, cpu::IntMatmulPath::kMadd16, true, false,
                       7);
    }
}

TEST(IntMatmul, PackedBIsExact) {
  // b in the s8 kernel's blocked layout (packed_b.cpp's quads, or oneDNN's reorder), row-major
  // and transposed, with padding in k and n; where the kernel reads plain b nothing is packed
  // and the same sums come out.
  const cpu::IntMatmulPath want = cpu::choose_int_matmul_path(127, 128);
  for (bool bt : {false, true})
    for (bool extreme : {false, true}) {
      check_int_matmul(9, 40, 11, bt, 127, 128, extreme, want, false, true);
      check_int_matmul(70, 300, 100, bt, 127, 128, extreme, want, false, true);
      check_int_matmul(64, 256, 256, bt, 127, 128, extreme, want, false, true);
    }
}

TEST(IntMatmul, ForcingASaturatingPathIsRejected) {
  if (cpu::choose_int_matmul_path(127, 128) == cpu::IntMatmulPath::kS8)
    GTEST_SKIP() << "this CPU's s8 kernel accumulates in int32: no int8 path saturates";
  cpu::IntMatmulDesc d;
  d.m = d.k = d.n = d.lda = d.ldb = d.ldc = 4;
  d.a_max = d.b_max = 127;
  d.force_path = cpu::IntMatmulPath::kS8;
  expect_forced_path_rejected(d, "forcing a saturating s8 GEMM was accepted");
}

// As for the float plans (test_matmul.cpp): operands of 2^31 elements or more take the
// exact f32-blocked path, not oneDNN's s8 kernel (onednn_info.hpp).
TEST(IntMatmul, ShapesBeyondInt32KernelsTakeTheF32BlockedPath) {
  cpu::IntMatmulDesc d;
  d.m = 4;
  d.k = int64_t{40} << 30;
  d.n = 8;
  d.lda = d.ldb = d.k;
  d.b_transposed = true;
  d.ldc = d.n;
  d.a_max = d.b_max = 8;  // int4 ranges: s8 would be exact on every CPU
  EXPECT_EQ(cpu::path_of(*cpu::plan_int_matmul(d)), cpu::IntMatmulPath::kF32Blocked);
  d.k = 64;
  d.lda = d.ldb = d.k;
  EXPECT_EQ(cpu::path_of(*cpu::plan_int_matmul(d)), cpu::IntMatmulPath::kS8);
}

TEST(IntMatmul, Int4RangeIsExactOnTheInt8Kernel) {
  for (bool bt : {false, true})
    for (bool extreme : {false, true}) {
      check_int_matmul(9, 40, 11, bt, 8, 8, extreme, cpu::IntMatmulPath::kS8);
      check_int_matmul(17, 3000, 13, bt, 7, 8, extreme, cpu::IntMatmulPath::kS8);
    }
}

// small_m_int_gemm (decode rows of the quantized matmul ops) against int64 sums: both
// layouts, odd k (the last k unpaired), n with a tail below 16 and above one 512-column
// tile, few rows (sums in L2) and more (b widened into panels, sums in registers), row
// strides wider than the rows, the int8 extremes. unit_tests_isa_sse41 runs the
// same on the portable loops.
TEST(SmallMIntGemm, ExactAgainstInt64Sums) {
  std::mt19937 g(7);
  for (const bool bt : {false, true})
    for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                                  {3, 7, 21},
                                  {8, 64, 24},
                                  {32, 33, 530},
                                  {5, 300, 1029},
                                  // the panel path (>= 7 rows on AVX2): rows in blocks of
                                  // 4, 2 and 1; odd k over several k blocks; a short group
                                  {7, 601, 100},
                                  {13, 2049, 70}})
      for (const bool extreme : {false, true}) {
        const int64_t lda = k + 3, ldb = (bt ? k : n) + 5, ldc = n + 2;
        std::vector<int8_t> a(static_cast<size_t>(m * lda)),
            b(static_cast<size_t>((bt ? n : k) * ldb));
        std::uniform_int_distribution<int> d(-128, 127);
        for (auto& x : a) x = static_cast<int8_t>(extreme ? -128 : d(g));
        for (auto& x : b) x = static_cast<int8_t>(extreme ? (d(g) >= 0 ? 127 : -128) : d(g));
        std::vector<int32_t> c(static_cast<size_t>(m * ldc), 777);
        cpu::small_m_int_gemm(a.data(), m, lda, b.data(), k, n, ldb, bt, c.data(), ldc);
        int64_t bad = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            int64_t r = 0;
            for (int64_t p = 0; p < k; ++p)
              r += int64_t{a[i * lda + p]} * b[bt ? j * ldb + p : p * ldb + j];
            bad += r != c[i * ldc + j];
          }
          for (int64_t j = n; j < ldc; ++j) bad += c[i * ldc + j] != 777;  // untouched
        }
        EXPECT_EQ(bad, 0) << "m=" << m << " k=" << k << " n=" << n << " bt=" << bt
                          << " extreme=" << extreme;
      }
}
