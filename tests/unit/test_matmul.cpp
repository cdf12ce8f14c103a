// kernels::cpu::matmul against a float64 reference.
//
// Integer-valued inputs make every fp32 partial sum exact (|sum| < 2^24), whatever order
// oneDNN sums in, so the result must equal the exact product rounded once to c's dtype:
// compared bit for bit. This is what catches a second rounding (e.g. a bf16 intermediate).
// Real-valued inputs are compared with the bound
//   |c - ref| <= (k + 2) * 2^-24 * (sum_p |a_ip b_pj| + |bias_j| + |c0_ij|) + ulp_out(|ref| + e)/2
// the first term (e) bounds fp32 summation in any order with or without FMA (Higham's
// gamma_{k+1}, plus one addition for the bias or the accumulated c), the second the single
// final rounding to c's dtype.
#include <gtest/gtest.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/cpu/f32_gemm_model.hpp"
#include "kernels/cpu/half_gemm_model.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/onednn_info.hpp"
#include "kernels/cpu/openblas.hpp"
#include "kernels/cpu/small_m_gemm.hpp"
#include "kernels/cpu/threads.hpp"

namespace cpu = commfuse::kernels::cpu;
using commfuse::DType;
using cpu::MatmulDesc;

namespace {

constexpr uint8_t kSentinel = 0xA5;  // c's padding bytes, which matmul must not touch

size_t esize(DType t) {
  return static_cast<size_t>(commfuse::dtype_bits(t) / 8);
}

std::vector<uint8_t> encode(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> raw(v.size() * esize(t));
  commfuse::convert(v.data(), DType::kFloat32, raw.data(), t, v.size());
  return raw;
}

float decode_at(const std::vector<uint8_t>& raw, DType t, size_t i) {
  float x = 0;
  commfuse::convert(raw.data() + i * esize(t), t, &x, DType::kFloat32, 1);
  return x;
}

float round_to(float x, DType t) {
  uint8_t tmp[4];
  commfuse::convert(&x, DType::kFloat32, tmp, t, 1);
  float y = 0;
  commfuse::convert(tmp, t, &y, DType::kFloat32, 1);
  return y;
}

// A problem in the caller's layout: padding of a and b holds NaN (reading it would poison
// the result), c's padding holds kSentinel bytes.
struct Problem {
  MatmulDesc d;
  std::vector<float> a, b, bias, c0;  // values, representable in their dtypes
  std::vector<uint8_t> a_raw, b_raw, bias_raw, c_raw;

  int64_t b_rows() const { return d.b_transposed ? d.n : d.k; }
  int64_t b_cols() const { return d.b_transposed ? d.k : d.n; }
  float a_at(int64_t i, int64_t p) const { return a[i * d.lda + p]; }
  float b_at(int64_t p, int64_t j) const {
    return d.b_transposed ? b[j * d.ldb + p] : b[p * d.ldb + j];
  }
};

Problem make_problem(const MatmulDesc& d, bool integers, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ints(-3, 3);
  std::uniform_real_distribution<float> reals(-1.0f, 1.0f);
  auto value = [&](DType t) {
    return integers ? static_cast<float>(ints(rng)) : round_to(reals(rng), t);
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Problem p;
  p.d = d;
  auto fill = [&](std::vector<float>& v, int64_t rows, int64_t cols, int64_t ld, DType t) {
    v.assign(static_cast<size_t>(rows * ld), nan);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) v[r * ld + c] = value(t);
  };
  fill(p.a, d.m, d.k, d.lda, d.a_dtype);
  fill(p.b, p.b_rows(), p.b_cols(), d.ldb, d.b_dtype);
  if (d.has_bias) fill(p.bias, 1, d.n, d.n, d.bias_dtype);
  p.c0.assign(static_cast<size_t>(d.m * d.ldc), 0.0f);
  if (d.accumulate)
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) p.c0[i * d.ldc + j] = value(DType::kFloat32);
  p.a_raw = encode(p.a, d.a_dtype);
  p.b_raw = encode(p.b, d.b_dtype);
  p.bias_raw = encode(p.bias, d.bias_dtype);
  p.c_raw.assign(static_cast<size_t>(d.m * d.ldc) * esize(d.c_dtype), kSentinel);
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      const float v = p.c0[i * d.ldc + j];
      commfuse::convert(&v, DType::kFloat32, p.c_raw.data() + (i * d.ldc + j) * esize(d.c_dtype),
                        d.c_dtype, 1);
    }
  return p;
}

void run(Problem& p) {
  cpu::matmul(p.d, p.a_raw.data(), p.b_raw.data(), p.d.has_bias ? p.bias_raw.data() : nullptr,
              p.c_raw.data());
}

// Result (m x n, dense) read from c; fails the test if c's padding changed.
std::vector<float> result(const Problem& p) {
  const MatmulDesc& d = p.d;
  std::vector<float> out(static_cast<size_t>(d.m * d.n));
  for (int64_t i = 0; i < d.m; ++i) {
    for (int64_t j = 0; j < d.n; ++j)
      out[i * d.n + j] = decode_at(p.c_raw, d.c_dtype, static_cast<size_t>(i * d.ldc + j));
    for (size_t byte = (i * d.ldc + d.n) * esize(d.c_dtype);
         byte < (i + 1) * d.ldc * esize(d.c_dtype); ++byte)
      EXPECT_EQ(p.c_raw[byte], kSentinel) << "c padding overwritten in row " << i;
  }
  return out;
}

struct Reference {
  std::vector<double> value;      // a @ b + bias + c0, exact in float64 for our inputs
  std::vector<double> magnitude;  // sum |a||b| + |bias| + |c0|
};

Reference reference(const Problem& p) {
  const MatmulDesc& d = p.d;
  Reference r;
  r.value.assign(static_cast<size_t>(d.m * d.n), 0.0);
  r.magnitude.assign(r.value.size(), 0.0);
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      double s = 0, mag = 0;
      for (int64_t q = 0; q < d.k; ++q) {
        const double prod = static_cast<double>(p.a_at(i, q)) * p.b_at(q, j);
        s += prod;
        mag += std::fabs(prod);
      }
      if (d.has_bias) s += p.bias[j], mag += std::fabs(p.bias[j]);
      if (d.accumulate) s += p.c0[i * d.ldc + j], mag += std::fabs(p.c0[i * d.ldc + j]);
      r.value[i * d.n + j] = s;
      r.magnitude[i * d.n + j] = mag;
    }
  return r;
}

// Integer-valued problem: bitwise equality with the exact result rounded once.
void expect_exact(Problem& p) {
  run(p);
  const std::vector<float> got = result(p);
  const Reference ref = reference(p);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = round_to(static_cast<float>(ref.value[i]), p.d.c_dtype);
    if (std::memcmp(&got[i], &want, 4) != 0 && ++bad <= 5)
      ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << want;
  }
  EXPECT_EQ(bad, 0);
}

double ulp(double x, DType t) {
  const int precision = t == DType::kFloat32 ? 24 : t == DType::kFloat16 ? 11 : 8;
  const int min_exp = t == DType::kFloat16 ? -14 : -126;
  const int e = x > 0 ? std::max(static_cast<int>(std::floor(std::log2(x))), min_exp) : min_exp;
  return std::ldexp(1.0, e - precision + 1);
}

void expect_close(Problem& p) {
  run(p);
  const std::vector<float> got = result(p);
  const Reference ref = reference(p);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e32 = (p.d.k + 2) * std::ldexp(1.0, -24) * ref.magnitude[i];
    const double bound = e32 + 0.5 * ulp(std::fabs(ref.value[i]) + e32, p.d.c_dtype);
    if (!(std::fabs(got[i] - ref.value[i]) <= bound) && ++bad <= 5)
      ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << ref.value[i]
                    << " bound " << bound;
  }
  EXPECT_EQ(bad, 0);
}

MatmulDesc desc_of(int64_t m, int64_t k, int64_t n, DType t, bool transposed = false) {
  return cpu::dense_matmul_desc(m, k, n, t, transposed);
}

std::string dtype_label(const testing::TestParamInfo<DType>& info) {
  return std::string(commfuse::dtype_name(info.param));
}

class MatmulTyped : public testing::TestWithParam<DType> {};

INSTANTIATE_TEST_SUITE_P(AllDtypes, MatmulTyped,
                         testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                         dtype_label);

TEST_P(MatmulTyped, ExactIntegerShapes) {
  const DType t = GetParam();
  // m = 1 is the decode case; k = 13, 37, 67 are not multiples of 8 (vector tails).
  const int64_t shapes[][3] = {{1, 1, 1},     {1, 37, 65},   {7, 13, 5},
                               {64, 100, 48}, {129, 67, 33}, {256, 512, 256}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    for (const bool transposed : {false, true}) {
      SCOPED_TRACE(testing::Message() << s[0] << "x" << s[1] << "x" << s[2] << " T=" << transposed);
      Problem p = make_problem(desc_of(s[0], s[1], s[2], t, transposed), true, seed++);
      expect_exact(p);
    }
  }
}

TEST_P(MatmulTyped, ExactWithBiasAndOutputDtypes) {
  const DType t = GetParam();
  uint32_t seed = 100;
  for (const DType c_dtype : {t, DType::kFloat32}) {
    for (const DType bias_dtype : {t, DType::kFloat32}) {
      SCOPED_TRACE(testing::Message() << "c " << commfuse::dtype_name(c_dtype) << " bias "
                                      << commfuse::dtype_name(bias_dtype));
      MatmulDesc d = desc_of(33, 70, 41, t);
      d.c_dtype = c_dtype;
      d.has_bias = true;
      d.bias_dtype = bias_dtype;
      Problem p = make_problem(d, true, seed++);
      expect_exact(p);
    }
  }
}

TEST_P(MatmulTyped, RowBlockOfLargerBuffers) {
  const DType t = GetParam();
  uint32_t seed = 200;
  for (const bool transposed : {false, true}) {
    for (const DType c_dtype : {t, DType::kFloat32}) {
      MatmulDesc d = desc_of(19, 45, 23, t, transposed);
      d.lda = 64;
      d.ldb += 7;
      d.ldc = 40;
      d.c_dtype = c_dtype;
      d.has_bias = true;
      Problem p = make_problem(d, true, seed++);
      expect_exact(p);
    }
  }
}

TEST_P(MatmulTyped, RealValuedWithinBound) {
  const DType t = GetParam();
  uint32_t seed = 300;
  const int64_t shapes[][3] = {{1, 512, 96}, {50, 300, 70}, {128, 512, 128}};
  for (const auto& s : shapes) {
    for (const DType c_dtype : {t, DType::kFloat32}) {
      MatmulDesc d = desc_of(s[0], s[1], s[2], t, seed % 2 == 1);
      d.c_dtype = c_dtype;
      d.has_bias = true;
      Problem p = make_problem(d, false, seed++);
      expect_close(p);
    }
  }
}

TEST_P(MatmulTyped, AccumulateAddsIntoFloat32C) {
  const DType t = GetParam();
  MatmulDesc d = desc_of(17, 29, 31, t);
  d.c_dtype = DType::kFloat32;
  d.accumulate = true;
  Problem p = make_problem(d, true, 400);  // c starts at c0 != 0
  expect_exact(p);                         // c0 + a @ b
  Problem real = make_problem(d, false, 401);
  expect_close(real);
}

TEST_P(MatmulTyped, AccumulateTwiceIsTwiceTheProduct) {
  const DType t = GetParam();
  MatmulDesc d = desc_of(40, 64, 24, t);
  d.c_dtype = DType::kFloat32;
  Problem once = make_problem(d, true, 500);
  run(once);
  d.accumulate = true;
  Problem twice = make_problem(d, true, 500);  // same a, b
  std::fill(twice.c_raw.begin(), twice.c_raw.end(), 0);
  run(twice);
  run(twice);
  const std::vector<float> x1 = result(once), x2 = result(twice);
  for (size_t i = 0; i < x1.size(); ++i) ASSERT_EQ(x2[i], 2 * x1[i]) << i;
}

TEST_P(MatmulTyped, SamePlanFromManyThreads) {
  const DType t = GetParam();
  MatmulDesc d = desc_of(48, 80, 40, t);
  d.c_dtype = DType::kFloat32;
  auto plan = cpu::plan_matmul(d);
  std::vector<Problem> problems;
  for (uint32_t i = 0; i < 4; ++i) problems.push_back(make_problem(d, true, 600 + i));
  std::vector<std::thread> threads;
  for (Problem& p : problems)
    threads.emplace_back([&plan, &p] {
      for (int rep = 0; rep < 3; ++rep)
        cpu::matmul(*plan, p.a_raw.data(), p.b_raw.data(), nullptr, p.c_raw.data());
    });
  for (auto& th : threads) th.join();
  for (Problem& p : problems) {
    const std::vector<float> got = result(p);
    const Reference ref = reference(p);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], ref.value[i]) << i;
  }
}

TEST(Matmul, ZeroRowsIsANoOp) {
  MatmulDesc d = desc_of(0, 8, 4, DType::kBFloat16);
  EXPECT_NO_THROW(cpu::matmul(d, nullptr, nullptr, nullptr, nullptr));
  uint8_t untouched = kSentinel;
  EXPECT_NO_THROW(cpu::matmul(d, nullptr, nullptr, nullptr, &untouched));
  EXPECT_EQ(untouched, kSentinel);
  d.k = 0;  // still validated
  EXPECT_THROW(cpu::matmul(d, nullptr, nullptr, nullptr, nullptr), commfuse::InvalidArgument);
}

TEST(Matmul, DescribeNamesImplementationAndWidening) {
  // More rows than the direct small-m kernel takes: oneDNN, native or widened.
  auto plan = cpu::plan_matmul(desc_of(64, 8, 4, DType::kFloat16));
  const std::string text = cpu::describe(*plan);
  EXPECT_NE(text.find("m=64 k=8 n=4 a=float16"), std::string::npos) << text;
  EXPECT_EQ(cpu::widens_inputs(*plan), text.find("float16 widened to float32") != std::string::npos)
      << text;
  // oneDNN 2.x has no fp16 matmul for CPUs at all (bf16 is native only with AVX512).
  if (cpu::onednn_version().starts_with("2.")) {
    EXPECT_TRUE(cpu::widens_inputs(*plan)) << text;
  }
  EXPECT_FALSE(cpu::widens_inputs(*cpu::plan_matmul(desc_of(4, 8, 4, DType::kFloat32))));
}

TEST(Matmul, FewRowsWithoutANativeKernelReadSixteenBitInPlace) {
  // The plan says which path it took; the path's contract is checked, whatever the CPU.
  // Without a native kernel, few rows go direct or widened as this machine's rates say
  // (direct_beats_widening); a b larger than the model's probe stays direct.
  for (const DType t : {DType::kFloat16, DType::kBFloat16})
    for (const int64_t k : {int64_t{64}, int64_t{2048}})
      for (const int64_t m : {int64_t{1}, int64_t{16}, cpu::kSmallMRows, cpu::kSmallMRows + 1}) {
        const int64_t n = k == 64 ? 40 : 2048;  // 2048 x 2048: larger than the probe's b
        const auto plan = cpu::plan_matmul(desc_of(m, k, n, t));
        const std::string text = cpu::describe(*plan);
        const bool small = text.find("commfuse:small_m") != std::string::npos;
        const bool native = !small && !cpu::widens_inputs(*plan);
        if (small) {
          EXPECT_LE(m, cpu::kSmallMRows) << text;
          EXPECT_FALSE(cpu::widens_inputs(*plan)) << text;
          EXPECT_NE(text.find(std::string(commfuse::dtype_name(t)) + " read in place"),
                    std::string::npos)
              << text;
        } else if (!native && m <= cpu::kSmallMRows) {  // widened where the kernel applies
          EXPECT_FALSE(cpu::direct_beats_widening(t, m, k, n, true)) << text;
          EXPECT_LE(k * n, 1024 * 1024) << text;
          EXPECT_NE(text.find("fp32 faster than the direct kernel here"), std::string::npos)
              << text;
        }
        if (!native && k == 2048 && m <= cpu::kSmallMRows) {
          EXPECT_TRUE(small) << text;
        }
      }
}

// The direct kernel is for 16-bit operands only.
class SmallMTyped : public testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(SixteenBit, SmallMTyped,
                         testing::Values(DType::kFloat16, DType::kBFloat16), dtype_label);

// Both 16-bit paths forced in turn, so a machine checks the one its model does not choose
// (native exists only where oneDNN has a kernel: elsewhere kNative falls back to widening).
TEST_P(SmallMTyped, EveryHalfPathIsExact) {
  const DType t = GetParam();
  uint32_t seed = 300;
  for (const cpu::HalfPath path : {cpu::HalfPath::kNative, cpu::HalfPath::kWidened})
    for (const bool transposed : {false, true})
      for (const int64_t m : {int64_t{3}, int64_t{129}}) {
        SCOPED_TRACE(testing::Message()
                     << "path " << static_cast<int>(path) << " m " << m << " T=" << transposed);
        MatmulDesc d = desc_of(m, 67, 45, t, transposed);
        d.half_path = path;
        d.has_bias = true;
        d.bias_dtype = t;
        const auto plan = cpu::plan_matmul(d);
        if (path == cpu::HalfPath::kWidened) {
          const std::string text = cpu::describe(*plan);
          EXPECT_TRUE(cpu::widens_inputs(*plan) || text.find("small_m") != std::string::npos)
              << text;
        }
        Problem p = make_problem(d, true, seed++);
        expect_exact(p);
      }
}

// The machine model and the plans agree: a shape the model says to widen is widened and
// says why; without a native kernel nothing is chosen.
TEST_P(SmallMTyped, PlansFollowTheMachineModel) {
  const DType t = GetParam();
  const cpu::HalfGemmModel& model = cpu::half_gemm_model(t);
  if (model.native && model.forced.empty()) {
    EXPECT_GT(model.native_macs_per_ns, 0.0);
    EXPECT_GT(model.f32_macs_per_ns, 0.0);
    EXPECT_GT(model.widen_ns_per_element, 0.0);
  }
  if (!model.native && model.forced.empty()) {  // the direct kernel against widening
    EXPECT_GT(model.direct_macs_per_ns, 0.0);
    EXPECT_GT(model.f32_macs_per_ns, 0.0);
    EXPECT_GT(model.widen_ns_per_element, 0.0);
  }
  for (const int64_t m : {int64_t{64}, int64_t{512}}) {
    const auto plan = cpu::plan_matmul(desc_of(m, 256, 256, t));
    const bool widen = cpu::widening_pays(t, m, 256, 256, true);
    const std::string text = cpu::describe(*plan);
    if (!model.native) {
      EXPECT_FALSE(widen);
      EXPECT_TRUE(cpu::widens_inputs(*plan)) << text;
    } else {
      EXPECT_EQ(cpu::widens_inputs(*plan), widen) << text;
      if (widen) {
        EXPECT_NE(text.find("fp32 faster here"), std::string::npos) << text;
      }
    }
  }
  // Few rows: the direct kernel exactly where the model measured it faster.
  for (const int64_t m : cpu::kFewRows) {
    const std::string text = cpu::describe(*cpu::plan_matmul(desc_of(m, 256, 256, t)));
    const bool direct = text.find("direct kernel faster here") != std::string::npos;
    EXPECT_EQ(direct, cpu::direct_pays(t, m)) << text;
    if (!model.native) {
      EXPECT_FALSE(direct) << text;  // nothing to beat
    }
    if (direct) {
      EXPECT_NE(text.find("commfuse:small_m"), std::string::npos) << text;
    }
  }
  EXPECT_NE(cpu::describe_half_gemm_model(t).find(commfuse::dtype_name(t)), std::string::npos);
}

// direct_calls_pay reads only the model it is given (a group decides from rank 0's): R
// direct calls of m rows against one call of m·R rows, direct or native as the model's
// direct_rows says for that many.
TEST(FewRowsModel, DirectCallsPayFromTheGivenModelOnly) {
  cpu::FewRowsModel mo;
  mo.usable = true;
  mo.direct_rows = 2;  // the direct kernel up to 2 rows
  const double native[4] = {4000, 4400, 5000, 6000}, direct[4] = {2000, 3300, 4000, 5000};
  std::copy(std::begin(native), std::end(native), mo.native_ns);
  std::copy(std::begin(direct), std::end(direct), mo.direct_ns);
  EXPECT_FALSE(cpu::direct_calls_pay(mo, 1, 2));  // 2 x 2.0 us against one direct 2-row 3.3
  EXPECT_FALSE(cpu::direct_calls_pay(mo, 2, 2));  // 2 x 3.3 against the native 4-row 5.0
  mo.direct_ns[1] = 2400;                         // 2 x 2.4 = 4.8 < 5.0
  EXPECT_TRUE(cpu::direct_calls_pay(mo, 2, 2));
  mo.direct_ns[1] = 2600;  // 5.2 > 5.0
  EXPECT_FALSE(cpu::direct_calls_pay(mo, 2, 2));
  mo.direct_ns[0] = 1000;  // 2 x 1.0 < the direct 2-row 2.6
  EXPECT_TRUE(cpu::direct_calls_pay(mo, 1, 2));
  EXPECT_FALSE(cpu::direct_calls_pay(mo, 1, 1));  // one call: nothing to compare
  EXPECT_FALSE(cpu::direct_calls_pay(mo, 3, 2));  // 3 rows do not take the direct kernel
  mo.usable = false;                              // no native kernel, or a pin
  EXPECT_FALSE(cpu::direct_calls_pay(mo, 1, 2));
}

// The few-rows model is timed exactly where there is a native kernel to beat and no pin,
// as the big model says (a native plan of few rows falls back to the direct kernel, so asking
// at few rows would read "native" everywhere); without it no verdict bit is set.
TEST(FewRowsModel, TimedWhereTheBigModelHasANativeKernel) {
  const uint32_t mask = cpu::direct_calls_mask(2);
  for (const DType t : {DType::kFloat16, DType::kBFloat16}) {
    const cpu::HalfGemmModel& big = cpu::half_gemm_model(t);
    const cpu::FewRowsModel& few = cpu::few_rows_model(t);
    EXPECT_EQ(few.usable, big.native && big.forced.empty()) << commfuse::dtype_name(t);
    if (!few.usable) {
      EXPECT_EQ(few.direct_rows, 0) << commfuse::dtype_name(t);
      for (int64_t m = 1; m <= cpu::kDirectCallsRows; ++m)
        EXPECT_FALSE(cpu::direct_calls_pay(mask, t, m)) << commfuse::dtype_name(t) << " m=" << m;
    }
  }
}

// The bits read back per dtype and m, nothing outside 1..kDirectCallsRows or for float32.
TEST(FewRowsModel, MaskHoldsEachVerdict) {
  for (const DType t : {DType::kFloat16, DType::kBFloat16}) {
    EXPECT_FALSE(cpu::direct_calls_pay(~0u, t, 0));
    EXPECT_FALSE(cpu::direct_calls_pay(~0u, t, cpu::kDirectCallsRows + 1));
    EXPECT_TRUE(cpu::direct_calls_pay(~0u, t, cpu::kDirectCallsRows));
  }
  EXPECT_FALSE(cpu::direct_calls_pay(~0u, DType::kFloat32, 1));
  // Each dtype's bits are its own.
  EXPECT_TRUE(cpu::direct_calls_pay(1u, DType::kFloat16, 1));
  EXPECT_FALSE(cpu::direct_calls_pay(1u, DType::kBFloat16, 1));
  EXPECT_TRUE(cpu::direct_calls_pay(1u << 8, DType::kBFloat16, 1));
}

TEST_P(SmallMTyped, DirectKernelEveryLayout) {
  const DType t = GetParam();
  uint32_t seed = 700;
  // n = 300: two full 128-column tiles and a tail; k = 37: a dot-product tail of 5.
  const int64_t shapes[][3] = {{1, 37, 300}, {2, 8, 1}, {5, 300, 129}, {32, 37, 300}};
  for (const auto& s : shapes)
    for (const bool transposed : {false, true})
      for (const DType c_dtype : {t, DType::kFloat32})
        for (const int bias : {0, 1, 2}) {  // none, same dtype, float32
          SCOPED_TRACE(testing::Message()
                       << s[0] << "x" << s[1] << "x" << s[2] << " T=" << transposed << " c "
                       << commfuse::dtype_name(c_dtype) << " bias " << bias);
          MatmulDesc d = desc_of(s[0], s[1], s[2], t, transposed);
          d.lda = s[1] + 3;
          d.ldb += 5;
          d.ldc = s[2] + 2;
          d.c_dtype = c_dtype;
          d.has_bias = bias != 0;
          d.bias_dtype = bias == 2 ? DType::kFloat32 : t;
          ASSERT_TRUE(cpu::small_m_gemm_applies(d));
          Problem exact = make_problem(d, true, seed++);
          expect_exact(exact);
          Problem real = make_problem(d, false, seed++);
          expect_close(real);
        }
}

TEST_P(SmallMTyped, DirectKernelSameBitsOnAnyThreadCount) {
  const DType t = GetParam();
  for (const bool transposed : {false, true}) {
    MatmulDesc d = desc_of(7, 200, 700, t, transposed);
    d.c_dtype = DType::kFloat32;
    Problem p = make_problem(d, false, 800);
    std::vector<float> one(static_cast<size_t>(d.m * d.n)), three(one.size());
    cpu::small_m_gemm(d, p.a_raw.data(), p.b_raw.data(), nullptr, one.data(), 1);
    cpu::small_m_gemm(d, p.a_raw.data(), p.b_raw.data(), nullptr, three.data(), 3);
    EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
  }
}

// Up to four rows of bf16 read b in registers (two columns per 32-bit lane, de-interleaved
// accumulators: 16 lanes where the AVX-512 copies run, 8 under COMMFUSE_MAX_CPU_ISA=avx2 or
// without AVX-512; register tiles of 4, 2 and 1 rows); five or more widen b into a block
// first. All must sum every element in k order with the same operations: rows 0..m-1 of a
// 5-row product equal the 1- to 4-row products bit for bit (k = 600: three k blocks; n =
// 300: two full tiles and a tail).
TEST(SmallM, Bf16InRegisterRowsMatchTheWidenedBlockBitwise) {
  for (const bool bias : {false, true}) {
    MatmulDesc d5 = desc_of(5, 600, 300, DType::kBFloat16);
    d5.c_dtype = DType::kFloat32;
    d5.has_bias = bias;
    d5.bias_dtype = DType::kFloat32;
    Problem p = make_problem(d5, false, 900 + bias);
    std::vector<float> five(static_cast<size_t>(5 * d5.n));
    cpu::small_m_gemm(d5, p.a_raw.data(), p.b_raw.data(),
                      bias ? reinterpret_cast<const float*>(p.bias_raw.data()) : nullptr,
                      five.data(), 1);
    for (const int64_t m : {1, 2, 3, 4}) {
      MatmulDesc d = d5;
      d.m = m;
      std::vector<float> few(static_cast<size_t>(m * d.n));
      cpu::small_m_gemm(d, p.a_raw.data(), p.b_raw.data(),
                        bias ? reinterpret_cast<const float*>(p.bias_raw.data()) : nullptr,
                        few.data(), 1);
      EXPECT_EQ(std::memcmp(few.data(), five.data(), few.size() * sizeof(float)), 0)
          << "m=" << m << " bias " << bias;
    }
  }
}

TEST(MatmulPlanCache, SameDescSamePlanDifferentDescNewPlan) {
  cpu::f32_gemm_model();  // its probes plan through the cache: measured before counting
  cpu::clear_matmul_plan_cache();
  EXPECT_EQ(cpu::matmul_plan_cache_size(), 0u);
  const MatmulDesc d = desc_of(16, 32, 8, DType::kFloat32);
  auto p1 = cpu::plan_matmul(d);
  auto p2 = cpu::plan_matmul(d);
  EXPECT_EQ(p1.get(), p2.get());
  EXPECT_EQ(cpu::matmul_plan_cache_size(), 1u);
  MatmulDesc other = d;
  other.ldc = 9;
  auto p3 = cpu::plan_matmul(other);
  EXPECT_NE(p3.get(), p1.get());
  EXPECT_EQ(cpu::matmul_plan_cache_size(), 2u);
  other = d;
  other.accumulate = true;
  EXPECT_NE(cpu::plan_matmul(other).get(), p1.get());
  EXPECT_EQ(cpu::matmul_plan_cache_size(), 3u);
}

TEST(MatmulPlanCache, EvictsLeastRecentlyUsed) {
  cpu::f32_gemm_model();  // its probes plan through the cache: measured before counting
  cpu::clear_matmul_plan_cache();
  const MatmulDesc first = desc_of(1, 1, 1, DType::kFloat32);
  const MatmulDesc hot = desc_of(2, 1, 1, DType::kFloat32);
  auto first_plan = cpu::plan_matmul(first);  // kept alive, so a re-plan is a new object
  auto hot_plan = cpu::plan_matmul(hot);
  for (int64_t i = 0; i < static_cast<int64_t>(cpu::kMatmulPlanCacheCapacity); ++i) {
    cpu::plan_matmul(desc_of(1, 1, 2 + i, DType::kFloat32));
    cpu::plan_matmul(hot);  // stays recently used
  }
  EXPECT_EQ(cpu::matmul_plan_cache_size(), cpu::kMatmulPlanCacheCapacity);
  EXPECT_EQ(cpu::plan_matmul(hot).get(), hot_plan.get());
  EXPECT_NE(cpu::plan_matmul(first).get(), first_plan.get());
}

template <typename E>
void expect_error(const MatmulDesc& d, const void* a, const void* b, const void* bias, void* c,
                  const std::string& needle) {
  try {
    cpu::matmul(d, a, b, bias, c);
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// fp32 on each provider (f32_gemm_model.hpp), every layout — row strides with NaN padding,
// transposed b, bias, accumulate — exact on integer values, so a provider that mishandles
// one of them is caught whichever the model picks here. Where OpenBLAS cannot be loaded,
// forcing it is PARAM_INVALID naming it.
TEST(MatmulF32Provider, EveryProviderEveryLayoutIsExact) {
  uint32_t seed = 900;
  for (const auto provider : {cpu::GemmProvider::kOneDnn, cpu::GemmProvider::kOpenBlas})
    for (const bool transposed : {false, true})
      for (const bool bias : {false, true})
        for (const bool accumulate : {false, true}) {
          MatmulDesc d = cpu::dense_matmul_desc(37, 70, 45, DType::kFloat32, transposed);
          d.lda = 75;
          d.ldb = (transposed ? 70 : 45) + 3;
          d.ldc = 50;
          d.has_bias = bias;
          d.accumulate = accumulate;
          d.provider = provider;
          const bool openblas = provider == cpu::GemmProvider::kOpenBlas;
          if (openblas && !cpu::openblas_available()) {
            std::vector<float> x(100000, 1.0f);
            expect_error<commfuse::InvalidArgument>(d, x.data(), x.data(), x.data(), x.data(),
                                                    "OpenBLAS");
            continue;
          }
          const std::string text = cpu::describe(*cpu::plan_matmul(d));
          EXPECT_EQ(text.find("openblas:sgemm") != std::string::npos, openblas) << text;
          Problem p = make_problem(d, true, seed++);
          expect_exact(p);
        }
}

// A stride past 32 bits (x2 of one row, any row stride: a legal view) with OpenBLAS pinned:
// cblas_sgemm cannot take it, so oneDNN runs it (it was an internal error at execute).
TEST(MatmulF32Provider, StridesPastInt32RunOnOneDnn) {
  MatmulDesc d = cpu::dense_matmul_desc(2, 1, 7, DType::kFloat32, false);
  d.ldb = int64_t{1} << 40;  // only row 0 of b exists, and k = 1 reads only it
  d.provider = cpu::GemmProvider::kOpenBlas;
  const std::string text = cpu::describe(*cpu::plan_matmul(d));
  EXPECT_EQ(text.find("openblas"), std::string::npos) << text;
  const float a[2] = {2.0f, -3.0f}, b[7] = {1, 2, 3, 4, 5, 6, 7};
  float c[14] = {};
  cpu::matmul(d, a, b, nullptr, c);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 7; ++j) EXPECT_EQ(c[i * 7 + j], a[i] * b[j]) << i << "," << j;
}

// The model and the plans agree: an fp32 GEMM runs on OpenBLAS exactly where the model says
// it pays for its class of shape; the model's line names what it measured.
TEST(MatmulF32Provider, PlansFollowTheMachineModel) {
  const cpu::F32GemmModel& model = cpu::f32_gemm_model();
  if (model.openblas_unavailable.empty() && model.forced.empty()) {
    EXPECT_GT(model.onednn_few, 0.0);
    EXPECT_GT(model.openblas_few, 0.0);
    EXPECT_GT(model.onednn_mid, 0.0);
    EXPECT_GT(model.openblas_mid, 0.0);
  }
  for (const int64_t m : {int64_t{8}, int64_t{300}}) {
    const auto plan = cpu::plan_matmul(cpu::dense_matmul_desc(m, 256, 256, DType::kFloat32));
    const std::string text = cpu::describe(*plan);
    EXPECT_EQ(text.find("openblas:sgemm") != std::string::npos,
              cpu::openblas_pays(m, 256, 256, cpu::compute_threads()))
        << text;
  }
  const std::string line = cpu::describe_f32_gemm_model();
  EXPECT_NE(line.find("float32 GEMM"), std::string::npos) << line;
  if (!model.openblas_unavailable.empty()) {
    EXPECT_NE(line.find("OpenBLAS unavailable"), std::string::npos) << line;
  }
}

// Dimensions or operand sizes from 2^31 elements (a fuzzer's GetWorkspaceSize inputs):
// oneDNN's brgemm kernels allocated m·k or k·n elements when created, or divided by zero.
// 16-bit shapes beyond 32-bit sizes plan on the fp32 path (or the direct small-m kernel),
// rows beyond kMaxCallElements in chunks, and a shape oneDNN refuses is "not supported"
// (PARAM_INVALID), never a crash or an allocation at plan time.
TEST(Matmul, ShapesBeyondInt32KernelsArePlannedOnTheFp32Path) {
  const int64_t big = int64_t{1} << 31;
  const int64_t shapes[][3] = {{big, 16, 8},
                               {4, 16, (int64_t{1} << 40) - 1},
                               {4, 40 * big, 8},
                               {64, 36, int64_t{366067187456}},
                               {int64_t{1} << 55, 16, 7}};
  for (const auto& s : shapes)
    for (const DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      SCOPED_TRACE(testing::Message()
                   << s[0] << "x" << s[1] << "x" << s[2] << " " << commfuse::dtype_name(t));
      EXPECT_FALSE(cpu::fits_onednn_int32_kernels(s[0], s[1], s[2]));
      try {
        const auto plan = cpu::plan_matmul(desc_of(s[0], s[1], s[2], t));
        const std::string text = cpu::describe(*plan);
        if (s[0] * std::max(s[1], s[2]) > cpu::kMaxCallElements || s[0] > cpu::kMaxCallElements) {
          // Chunks of rows whose operands fit: any kernel may run them.
          EXPECT_NE(text.find("in chunks of"), std::string::npos) << text;
        } else if (t != DType::kFloat32) {
          // Widened, or (few rows) the direct kernel that reads the 16-bit operands itself.
          EXPECT_TRUE(cpu::widens_inputs(*plan) ||
                      text.find("commfuse:small_m") != std::string::npos)
              << text;
        }
      } catch (const commfuse::Error& e) {
        EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid) << e.what();
        EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
      }
    }
  EXPECT_TRUE(cpu::fits_onednn_int32_kernels(4096, 4096, 4096));
  EXPECT_FALSE(cpu::fits_onednn_int32_kernels(1 << 16, 1 << 16, 1));
}

// A plan over more rows than one call takes runs them chunk by chunk, each row's result in
// its place: row r of a holds r % 3 + 1 in every column, b is all ones, so c[r][j] is
// (r % 3 + 1) · k exactly. (k = 2^20: chunks of 64 rows; 65 rows: a full chunk and a tail.)
TEST(Matmul, RowsBeyondOneCallRunInChunks) {
  const int64_t m = 65, k = int64_t{1} << 20, n = 2;
  MatmulDesc d = desc_of(m, k, n, DType::kBFloat16);
  d.c_dtype = DType::kFloat32;
  const auto plan = cpu::plan_matmul(d);
  ASSERT_NE(cpu::describe(*plan).find("in chunks of 64 rows"), std::string::npos)
      << cpu::describe(*plan);
  const uint16_t bf16_of[] = {0x3f80, 0x4000, 0x4040};  // 1, 2, 3
  std::vector<uint16_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n), 0x3f80);
  for (int64_t r = 0; r < m; ++r)
    std::fill(a.begin() + r * k, a.begin() + (r + 1) * k, bf16_of[r % 3]);
  std::vector<float> c(static_cast<size_t>(m * n), -1.0f);
  cpu::matmul(*plan, a.data(), b.data(), nullptr, c.data());
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(c[r * n + j], static_cast<float>((r % 3 + 1) * k)) << "row " << r << " col " << j;
}

TEST(Matmul, InvalidDescriptorsNameTheArgument) {
  using commfuse::InvalidArgument;
  float buf[64] = {};
  const MatmulDesc ok = desc_of(2, 4, 4, DType::kFloat32);
  auto bad = [&](auto edit, const std::string& needle) {
    MatmulDesc d = ok;
    edit(d);
    expect_error<InvalidArgument>(d, buf, buf, buf, buf, needle);
  };
  bad([](MatmulDesc& d) { d.m = -1; }, "m is -1");
  bad([](MatmulDesc& d) { d.k = 0; }, "k is 0");
  bad([](MatmulDesc& d) { d.n = 0; }, "n is 0");
  bad([](MatmulDesc& d) { d.a_dtype = d.b_dtype = DType::kInt8; }, "a dtype int8");
  bad([](MatmulDesc& d) { d.b_dtype = DType::kFloat16; }, "b dtype float16");
  bad([](MatmulDesc& d) { d.c_dtype = DType::kBFloat16; }, "c dtype bfloat16");
  bad([](MatmulDesc& d) { d.has_bias = true, d.bias_dtype = DType::kFloat16; },
      "bias dtype float16");
  bad(
      [](MatmulDesc& d) {
        d.a_dtype = d.b_dtype = d.c_dtype = DType::kBFloat16;
        d.accumulate = true;
      },
      "accumulate needs a float32 c");
  bad([](MatmulDesc& d) { d.lda = 3; }, "lda is 3");
  bad([](MatmulDesc& d) { d.ldb = 3; }, "ldb is 3");
  bad([](MatmulDesc& d) { d.b_transposed = true, d.n = 8, d.ldb = 3; }, "(b transposed)");
  bad([](MatmulDesc& d) { d.ldc = 2; }, "ldc is 2");
  EXPECT_THROW(cpu::plan_matmul([&] {
                 MatmulDesc d = ok;
                 d.lda = 0;
                 return d;
               }()),
               InvalidArgument);
}

TEST(Matmul, NullPointersNameTheArgument) {
  using commfuse::NullPointerError;
  float buf[64] = {};
  MatmulDesc d = desc_of(2, 4, 4, DType::kFloat32);
  expect_error<NullPointerError>(d, nullptr, buf, nullptr, buf, "a is null");
  expect_error<NullPointerError>(d, buf, nullptr, nullptr, buf, "b is null");
  expect_error<NullPointerError>(d, buf, buf, nullptr, nullptr, "c is null");
  d.has_bias = true;
  expect_error<NullPointerError>(d, buf, buf, nullptr, buf, "bias is null");
}

TEST(ComputeThreads, OverrideElseCoresPerLocalRank) {
  EXPECT_EQ(cpu::compute_threads_for(3, 16, 4, 16), 3);
  EXPECT_EQ(cpu::compute_threads_for(0, 16, 4, 16), 4);
  EXPECT_EQ(cpu::compute_threads_for(0, 16, 3, 16), 5);
  EXPECT_EQ(cpu::compute_threads_for(0, 2, 8, 2), 1);
  EXPECT_EQ(cpu::compute_threads_for(0, 2, 0, 2), 2);
  const int before = cpu::local_ranks(), before_cores = cpu::host_cores_setting();
  cpu::set_local_ranks(0, 0);
  EXPECT_EQ(cpu::local_ranks(), 1);
  cpu::set_local_ranks(before, before_cores);
  EXPECT_GE(cpu::compute_threads(), 1);
  if (std::getenv("COMMFUSE_NUM_THREADS") == nullptr) {  // the override may exceed the mask
    EXPECT_LE(cpu::compute_threads(), cpu::allowed_compute_cores());
  }
}

// A process bound to fewer cores than its share (mpirun's default --bind-to core for 2
// ranks, taskset, a cpuset) runs no more threads than its mask holds; one bound to a larger
// set that other ranks share still takes only its share.
TEST(ComputeThreads, NeverMoreThanTheAffinityMaskHolds) {
  EXPECT_EQ(cpu::compute_threads_for(0, 2, 1, 1), 1);     // one rank bound to one of 2
  EXPECT_EQ(cpu::compute_threads_for(0, 64, 2, 1), 1);    // 2 ranks, one core each, of 64
  EXPECT_EQ(cpu::compute_threads_for(0, 64, 2, 32), 32);  // a socket each
  EXPECT_EQ(cpu::compute_threads_for(0, 64, 8, 32), 8);   // 4 ranks per socket
  EXPECT_EQ(cpu::compute_threads_for(6, 64, 2, 1), 6);    // COMMFUSE_NUM_THREADS still wins
  EXPECT_GE(commfuse::cpu::allowed_cores(), 1);
  EXPECT_LE(commfuse::cpu::allowed_cores(), commfuse::cpu::online_cores());
  EXPECT_GE(cpu::allowed_compute_cores(), 1);
  EXPECT_LE(cpu::allowed_compute_cores(), commfuse::cpu::online_cores());
}

// The ranks of one host exchange their compute CPU sets as range lists; the union's size is
// the cores they share (4 ranks confined to a 2-core cpuset of a 64-core host share 2 cores,
// where 4 ranks bound to a core each have 4). A list that cannot be read gives 0: unknown.
TEST(ComputeThreads, CpuListsOfTheRanksGiveTheCoresTheyShare) {
  const std::string mine = cpu::compute_cpu_list();
  ASSERT_FALSE(mine.empty());
  EXPECT_EQ(cpu::cpus_in_union({mine}), cpu::allowed_compute_cores()) << mine;
  EXPECT_EQ(cpu::cpus_in_union({mine, mine, mine}), cpu::allowed_compute_cores()) << mine;
  EXPECT_EQ(cpu::cpus_in_union({"0-1", "0-1", "0-1", "0-1"}), 2);
  EXPECT_EQ(cpu::cpus_in_union({"0", "1", "2", "3"}), 4);
  EXPECT_EQ(cpu::cpus_in_union({"0-3,8", "2-5,63"}), 8);
  for (const char* bad : {"", "-", "1-0", "0,", ",0", "0-", "a", "0 1", "99999"})
    EXPECT_EQ(cpu::cpus_in_union({"0-1", bad}), 0) << '"' << bad << '"';
  // The share of a confined group: 4 ranks on the 2 cores they share take a thread each.
  const int ranks = cpu::local_ranks(), cores = cpu::host_cores_setting();
  cpu::set_local_ranks(4, 2);
  EXPECT_EQ(cpu::local_ranks(), 4);
  EXPECT_EQ(cpu::host_cores(), 2);
  EXPECT_EQ(cpu::host_cores_setting(), 2);
  EXPECT_EQ(cpu::compute_threads_for(0, cpu::host_cores(), cpu::local_ranks(), 2), 1);
  cpu::set_local_ranks(4, 0);  // unknown: the online cores
  EXPECT_EQ(cpu::host_cores(), commfuse::cpu::online_cores());
  EXPECT_EQ(cpu::host_cores_setting(), 0);
  cpu::set_local_ranks(ranks, cores);
}

// A core is left free (for MPI's progress thread) only where the ranks' compute threads
// do not take every core, and one this process may run on.
TEST(ComputeThreads, CoreLeftFreeOnlyWhereTheRanksThreadsDoNotTakeEveryCore) {
  EXPECT_FALSE(cpu::core_left_free(0, 2, 2, 2));    // 2 ranks x 1 thread on 2 cores
  EXPECT_FALSE(cpu::core_left_free(0, 16, 4, 16));  // 4 x 4
  EXPECT_TRUE(cpu::core_left_free(0, 16, 3, 16));   // 3 x 5 = 15
  EXPECT_FALSE(cpu::core_left_free(0, 2, 1, 2));    // 1 x 2
  EXPECT_TRUE(cpu::core_left_free(1, 2, 1, 2));     // COMMFUSE_NUM_THREADS=1, one rank
  EXPECT_TRUE(cpu::core_left_free(3, 16, 4, 16));   // 4 x 3 = 12
  EXPECT_FALSE(cpu::core_left_free(0, 2, 3, 2));    // more ranks than cores: 3 x 1
  EXPECT_FALSE(cpu::core_left_free(8, 16, 2, 16));  // 2 x 8
  EXPECT_FALSE(cpu::core_left_free(0, 2, 1, 1));    // bound to one core: none free in it
  EXPECT_FALSE(cpu::core_left_free(0, 2, 2, 1));    // mpirun's 2 ranks, a core each
}

}  // namespace
