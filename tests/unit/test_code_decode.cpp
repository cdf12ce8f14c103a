// decode_codes (the FP8/HiF8 matmul's activation decoder) equals the exact code table bit for
// bit on whichever vector path this machine and COMMFUSE_MAX_CPU_ISA select — the suite
// runs natively, capped at avx2 (make test) and at sse41 (unit_tests_isa_sse41) — for every
// code, including NaNs and infinities, at lengths and offsets that exercise the tails.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/cpu/code_decode.hpp"
#include "kernels/cpu/dequant.hpp"

using commfuse::DType;
namespace cpu = commfuse::kernels::cpu;

namespace {

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

class CodeDecode : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(CodeDecode, EqualsTheTableBitForBit) {
  const auto [dtype, to_bf16] = GetParam();
  ASSERT_TRUE(cpu::decodable_code(dtype));
  const float* table = cpu::code_values(dtype);
  const std::string path = cpu::decode_codes_path(dtype, to_bf16);
  SCOPED_TRACE("path " + path);
  // Which path runs, from the CPU's own features and the cap level (not the capped feature
  // set the implementation reads), so a wrong rule there fails here.
  namespace cf = commfuse::cpu;
  const auto& det = cf::detected_features();
  const cf::IsaLevel cap = cf::max_isa();
  const bool avx512 = det.avx512f && det.avx512bw && cap >= cf::IsaLevel::kAvx512Core;
  const bool f16c = det.avx2 && det.f16c && cap >= cf::IsaLevel::kAvx2;
  if (avx512)
    EXPECT_EQ(path, "avx512bw");
  else if (!to_bf16 && dtype != DType::kHiFloat8 && f16c)
    EXPECT_EQ(path, "avx2+f16c");
  else
    EXPECT_EQ(path, "table");

  // Every code in order, then random codes, decoded from several offsets and lengths.
  std::vector<uint8_t> src(256 + 4099);
  for (size_t c = 0; c < 256; ++c) src[c] = static_cast<uint8_t>(c);
  std::mt19937 rng(17);
  for (size_t i = 256; i < src.size(); ++i) src[i] = static_cast<uint8_t>(rng());
  const size_t es = to_bf16 ? 2 : 4;
  for (const size_t off : {size_t{0}, size_t{1}, size_t{7}})
    for (const size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{255},
                           src.size() - off}) {
      std::vector<uint8_t> out((n + 4) * es, 0xCD);
      // Element-aligned (as every caller is) but not vector-aligned.
      const size_t lead = es * ((off % 3) + 1);
      uint8_t* dst = out.data() + lead;
      cpu::decode_codes(src.data() + off, dtype, to_bf16, dst, n);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t want = bits_of(table[src[off + i]]);
        uint32_t got = 0;
        if (to_bf16) {
          uint16_t h;
          std::memcpy(&h, dst + i * 2, 2);
          got = uint32_t{h} << 16;
        } else {
          std::memcpy(&got, dst + i * 4, 4);
        }
        ASSERT_EQ(got, want) << "code 0x" << std::hex << int{src[off + i]} << " at " << std::dec
                             << i << " of " << n << " (offset " << off << ")";
      }
      // Nothing written outside [dst, dst + n elements).
      for (size_t b = 0; b < out.size(); ++b) {
        if (b >= lead && b < lead + n * es) continue;
        ASSERT_EQ(out[b], 0xCD) << "byte " << b << " outside the " << n << " elements written";
      }
      // The same decode with the codes copied verbatim in the same pass (all_gather_matmul's
      // gather_out), the copy aligned to 32 bytes (the streaming stores' alignment) and 1 and
      // 31 bytes past it: the decoded values unchanged, the copy exact, nothing written around it.
      for (const size_t copy_lead : {size_t{0}, size_t{1}, size_t{31}}) {
        std::vector<uint8_t> out2((n + 4) * es, 0xCD);
        alignas(64) static uint8_t copy_buf[64 + 256 + 4099 + 64];
        std::memset(copy_buf, 0xAB, sizeof(copy_buf));
        uint8_t* copy = copy_buf + 64 + copy_lead;
        cpu::decode_codes(src.data() + off, dtype, to_bf16, out2.data() + lead, n, copy);
        ASSERT_EQ(out2, out) << "decode with a copy, copy offset " << copy_lead;
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(copy[i], src[off + i]) << "copied code " << i << " of " << n;
        for (size_t b = 0; b < sizeof(copy_buf); ++b) {
          if (b >= 64 + copy_lead && b < 64 + copy_lead + n) continue;
          ASSERT_EQ(copy_buf[b], 0xAB) << "copy byte " << b << " outside the " << n << " codes";
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, CodeDecode,
                         ::testing::Combine(::testing::Values(DType::kFloat8E4M3FN,
                                                              DType::kFloat8E5M2, DType::kHiFloat8),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(commfuse::dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_bf16" : "_f32");
                         });

TEST(CodeDecode, TableValuesFitBfloat16Exactly) {
  // The bf16 output, and the AVX-512 fp32 output (built from it), are the fp32 value's
  // upper half: exact only if the lower half is zero, for every code, NaNs included.
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kHiFloat8}) {
    const float* v = cpu::code_values(t);
    for (int c = 0; c < 256; ++c)
      EXPECT_EQ(bits_of(v[c]) & 0xFFFFu, 0u) << commfuse::dtype_name(t) << " " << c;
  }
}

}  // namespace
