// The epilogue loops round the multiply and the add separately on every copy of the array
// loops (core/simd.hpp): SPEC §3 / §6 define y = f32(acc) * scales + bias as fp32
// operations in that order, and the AVX-512 copies run where FMA exists, so one contracted
// a*b + c would change bits. Only a copy built for a target with FMA can contract (GCC's
// avx2 target has none): the loops' check below can fail where the AVX-512 copy runs
// (natively on AVX-512 CPUs; capped runs check the other copies' bits), and the build flag
// itself is checked on any CPU with FMA through multiply_add_as_built.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/simd.hpp"
#include "kernels/cpu/dequant.hpp"
#include "ops/alltoall_quant_matmul/row_kernels.hpp"

namespace commfuse {
namespace {

struct Inputs {
  std::vector<int32_t> acc;
  std::vector<float> scale, bias;
  std::vector<float> y0;  // dequant_segment's running sum
};

Inputs random_inputs(size_t n) {
  std::mt19937 g(7);
  std::uniform_int_distribution<int32_t> a(-(1 << 24), 1 << 24);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  Inputs in;
  for (size_t j = 0; j < n; ++j) {
    in.acc.push_back(a(g));
    in.scale.push_back(u(g) * 1e-3f);
    in.bias.push_back(u(g) * 100.0f);
    in.y0.push_back(u(g) * 1000.0f);
  }
  return in;
}

// Each product rounded to fp32 before the sum, as volatile stores force here.
float product_then_add(float x, float y, float z) {
  volatile float p = x * y;
  return p + z;
}

// n is not a multiple of 16, so every copy runs its vector body and its scalar tail.
constexpr size_t kN = 4099;

TEST(ArrayLoops, EpilogueRowsRoundTheProductBeforeTheAdd) {
  const Inputs in = random_inputs(kN);
  const float s = 0.37109375f;
  std::vector<float> y(kN), seg = in.y0, ys(kN);
  ops::a2aq::dequant_row(in.acc.data(), in.scale.data(), s, in.bias.data(), y.data(), kN);
  ops::a2aq::dequant_segment(in.acc.data(), in.scale.data(), s, seg.data(), kN, false);
  kernels::cpu::scale_int_row(in.acc.data(), s, in.scale.data(), in.bias.data(), ys.data(), kN);
  size_t fma_differs = 0, fma_differs_seg = 0;
  for (size_t j = 0; j < kN; ++j) {
    const float acc = static_cast<float>(in.acc[j]);
    volatile float t = acc * in.scale[j];
    const float want_row = product_then_add(t, s, in.bias[j]);
    volatile float t2 = acc * s;
    const float want_seg = product_then_add(t2, in.scale[j], in.y0[j]);
    volatile float sb = s * in.scale[j];
    const float want_scale = product_then_add(acc, sb, in.bias[j]);
    ASSERT_EQ(y[j], want_row) << "dequant_row, element " << j << ", array loops "
                              << cpu::array_loops_name();
    ASSERT_EQ(seg[j], want_seg) << "dequant_segment, element " << j << ", array loops "
                                << cpu::array_loops_name();
    ASSERT_EQ(ys[j], want_scale) << "scale_int_row, element " << j << ", array loops "
                                 << cpu::array_loops_name();
    if (std::fma(static_cast<float>(t), s, in.bias[j]) != want_row) ++fma_differs;
    if (std::fma(static_cast<float>(t2), in.scale[j], in.y0[j]) != want_seg) ++fma_differs_seg;
  }
  // The inputs are ones where a fused multiply-add gives other bits, so a contracted loop
  // would fail above.
  EXPECT_GT(fma_differs, kN / 100);
  EXPECT_GT(fma_differs_seg, kN / 100);
}

// The library's build flag: a*b + c compiled for an FMA target rounds twice.
TEST(ArrayLoops, TheLibraryDoesNotContractMultiplyAdd) {
  if (!cpu::detected_features().fma) GTEST_SKIP() << "no FMA on this CPU: nothing could contract";
  const Inputs in = random_inputs(256);
  size_t differs = 0;
  for (size_t j = 0; j < in.bias.size(); ++j) {
    const float a = static_cast<float>(in.acc[j]), b = in.scale[j], c = in.bias[j];
    ASSERT_EQ(commfuse::simd::multiply_add_as_built(a, b, c), product_then_add(a, b, c))
        << "element " << j;
    differs += std::fma(a, b, c) != product_then_add(a, b, c);
  }
  EXPECT_GT(differs, 0u);  // inputs where a contracted build would differ
}

}  // namespace
}  // namespace commfuse
