// kernels/cpu/packed_b: b packed into oneDNN's blocked weight layouts.
//
// The reference for the bytes is oneDNN's own reorder primitive from the plain (strided)
// layout into the same descriptor; every layout oneDNN's brgemm matmul picks for 16-bit
// weights (16 k-pairs by 16/32/48/64 columns) and shapes with padding in k, n or both are
// checked, on whichever path this CPU and COMMFUSE_MAX_CPU_ISA select (the AVX-512 loop, or
// the scalar one in the AVX2-capped ASan run). Then, where this machine has a native 16-bit
// kernel reading a packed b, a GEMM over packed b must give the plain GEMM's bits on
// integer-valued inputs (every fp32 sum exact).
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_plan.hpp"
#include "kernels/cpu/packed_b.hpp"

namespace cpu = commfuse::kernels::cpu;
using commfuse::DType;
using tag = dnnl::memory::format_tag;

namespace {

struct Shape {
  int64_t k, n, ldb;
};

std::vector<uint16_t> random_b(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> b(static_cast<size_t>(s.k * s.ldb));
  // Normal numbers only, in both bf16 and fp16 (bit 13, in both exponent fields, set; bit
  // 14 clear): oneDNN's reorder converts through fp32 arithmetic, which keeps a normal
  // value's bits but turns -0 into +0 and need not keep NaN payloads or subnormals.
  for (auto& v : b) v = static_cast<uint16_t>((rng() & 0x9FFFu) | 0x2000u);
  return b;
}

// oneDNN's reorder of b (k x n, row stride ldb) into md.
std::vector<uint8_t> reference_pack(const dnnl::memory::desc& md, const Shape& s,
                                    std::vector<uint16_t>& b) {
  // The product's engine: its first use applies the ISA cap, which must precede any JIT.
  const dnnl::engine& eng = cpu::cpu_engine();
  dnnl::stream strm(eng);
  const dnnl::memory::desc plain({s.k, s.n}, md.data_type(), dnnl::memory::dims{s.ldb, 1});
  dnnl::memory src(plain, eng, b.data());
  std::vector<uint8_t> out(md.get_size(), 0xCD);
  dnnl::memory dst(md, eng, out.data());
  dnnl::reorder(src, dst).execute(strm, src, dst);
  strm.wait();
  return out;
}

// md with the s8 x s8 compensation oneDNN's brgemm asks for without AMX: an int32 per
// column (mask 2) after the blocks.
dnnl::memory::desc with_compensation(dnnl::memory::desc md) {
  md.data.extra.flags = dnnl_memory_extra_flag_compensation_conv_s8s8;
  md.data.extra.compensation_mask = 2;
  return md;
}

const Shape kShapes[] = {{256, 256, 256}, {64, 64, 64},   {4096, 64, 64},
                         {100, 70, 70},   {33, 130, 130}, {32, 64, 100},
                         {1, 1, 1},       {31, 200, 208}, {2, 32, 40}};

TEST(PackedB, EveryBrgemmLayoutMatchesOneDnnReorder) {
  for (const tag t : {tag::BA16a16b2a, tag::BA16a32b2a, tag::BA16a48b2a, tag::BA16a64b2a}) {
    for (const auto dtype : {dnnl::memory::data_type::bf16, dnnl::memory::data_type::f16}) {
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(testing::Message() << "tag " << static_cast<int>(t) << " k=" << s.k
                                        << " n=" << s.n << " ldb=" << s.ldb);
        const dnnl::memory::desc md({s.k, s.n}, dtype, t);
        const auto layout = cpu::packed_layout(md);
        ASSERT_TRUE(layout.has_value());
        EXPECT_EQ(layout->bytes, md.get_size());
        auto b = random_b(s, static_cast<uint32_t>(s.k * 131 + s.n));
        const auto want = reference_pack(md, s, b);
        std::vector<uint8_t> got(layout->bytes + 1, 0xEE);  // one guard byte past the end
        cpu::pack_b(*layout, b.data(), s.k, s.n, s.ldb, got.data());
        EXPECT_EQ(got.back(), 0xEE) << "wrote past the packed buffer";
        got.pop_back();
        size_t first = 0;
        while (first < want.size() && got[first] == want[first]) ++first;
        ASSERT_EQ(first, want.size()) << "first differing byte";
      }
    }
  }
}

// PackedWeight's packing of a transposed x2 (an (n, k) buffer, row stride ldb >= k): the
// same bytes as oneDNN's reorder of the (k, n) matrix it holds.
TEST(PackedB, TransposedSourceMatchesOneDnnReorder) {
  for (const tag t : {tag::BA16a32b2a, tag::BA16a64b2a}) {
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(testing::Message()
                   << "tag " << static_cast<int>(t) << " k=" << s.k << " n=" << s.n);
      const dnnl::memory::desc md({s.k, s.n}, dnnl::memory::data_type::bf16, t);
      const auto layout = cpu::packed_layout(md);
      ASSERT_TRUE(layout.has_value());
      auto b = random_b(s, static_cast<uint32_t>(s.k * 7 + s.n));  // (k, n), row stride ldb
      const int64_t ldt = s.k + 3;                                 // the (n, k) copy's stride
      std::vector<uint16_t> bt(static_cast<size_t>(s.n * ldt), 0xFFFF);
      for (int64_t i = 0; i < s.k; ++i)
        for (int64_t j = 0; j < s.n; ++j) bt[j * ldt + i] = b[i * s.ldb + j];
      const auto want = reference_pack(md, s, b);
      std::vector<uint8_t> got(layout->bytes + 1, 0xEE);
      cpu::pack_b_transposed(*layout, bt.data(), s.k, s.n, ldt, got.data());
      EXPECT_EQ(got.back(), 0xEE) << "wrote past the packed buffer";
      got.pop_back();
      size_t first = 0;
      while (first < want.size() && got[first] == want[first]) ++first;
      ASSERT_EQ(first, want.size()) << "first differing byte";
    }
  }
}

TEST(PackedB, PlainAndOtherLayoutsAreNotClaimed) {
  EXPECT_FALSE(
      cpu::packed_layout(dnnl::memory::desc({64, 64}, dnnl::memory::data_type::bf16, tag::ab)));
  EXPECT_FALSE(cpu::packed_layout(
      dnnl::memory::desc({64, 64}, dnnl::memory::data_type::f32, tag::BA16a64b)));
  // int8 weights with a compensation this file does not write: per row (mask 1), scaled
  // (oneDNN's scale_adjust 0.5 for AVX-512 without VNNI), or for a zero point.
  dnnl::memory::desc per_row({64, 64}, dnnl::memory::data_type::s8, tag::BA16a64b4a);
  per_row.data.extra.flags = dnnl_memory_extra_flag_compensation_conv_s8s8;
  per_row.data.extra.compensation_mask = 1;
  EXPECT_FALSE(cpu::packed_layout(per_row));
  dnnl::memory::desc scaled =
      with_compensation(dnnl::memory::desc({64, 64}, dnnl::memory::data_type::s8, tag::BA16a64b4a));
  scaled.data.extra.flags |= dnnl_memory_extra_flag_scale_adjust;
  scaled.data.extra.scale_adjust = 0.5f;
  EXPECT_FALSE(cpu::packed_layout(scaled));
  dnnl::memory::desc zero_point({64, 64}, dnnl::memory::data_type::s8, tag::BA16a64b4a);
  zero_point.data.extra.flags = dnnl_memory_extra_flag_compensation_conv_asymmetric_src;
  zero_point.data.extra.asymm_compensation_mask = 2;
  EXPECT_FALSE(cpu::packed_layout(zero_point));
}

// int8 weights in the quad layouts (AMX-INT8 / VNNI brgemm: BA16a64b4a and narrower
// column blocks), with and without the s8 x s8 compensation (brgemm without AMX), from
// row-major and transposed sources: byte-equal to oneDNN's reorder (which runs on any CPU).
TEST(PackedB, Int8QuadLayoutsMatchOneDnnReorder) {
  const dnnl::engine& eng = cpu::cpu_engine();
  dnnl::stream strm(eng);
  for (const tag t : {tag::BA16a64b4a, tag::BA16a32b4a, tag::BA16a16b4a}) {
    for (const Shape& s : kShapes) {
      for (const bool transposed : {false, true})
        for (const bool comp : {false, true}) {
          SCOPED_TRACE(testing::Message()
                       << "tag " << static_cast<int>(t) << " k=" << s.k << " n=" << s.n
                       << " transposed " << transposed << " compensation " << comp);
          dnnl::memory::desc md({s.k, s.n}, dnnl::memory::data_type::s8, t);
          if (comp) md = with_compensation(md);
          const auto layout = cpu::packed_layout(md);
          ASSERT_TRUE(layout.has_value());
          EXPECT_EQ(layout->pair, 4);
          EXPECT_EQ(layout->comp_offset != 0, comp);
          // Row-major (k, ldb) or an (n, ldk) buffer viewed as (k, n).
          const int64_t ld = transposed ? s.k + 3 : s.ldb;
          std::mt19937 rng(static_cast<uint32_t>(s.k * 7 + s.n));
          std::vector<int8_t> b(static_cast<size_t>((transposed ? s.n : s.k) * ld));
          for (auto& v : b) v = static_cast<int8_t>(rng());
          // The reference reorders a dense row-major copy: oneDNN 2.6 has no reorder from a
          // transposed source into the compensated layouts.
          std::vector<int8_t> row_major(static_cast<size_t>(s.k * s.n));
          for (int64_t p = 0; p < s.k; ++p)
            for (int64_t j = 0; j < s.n; ++j)
              row_major[static_cast<size_t>(p * s.n + j)] =
                  b[static_cast<size_t>(transposed ? j * ld + p : p * ld + j)];
          const dnnl::memory::desc plain({s.k, s.n}, dnnl::memory::data_type::s8, tag::ab);
          dnnl::memory src(plain, eng, row_major.data());
          std::vector<uint8_t> want(md.get_size(), 0xCD);
          dnnl::memory dst(md, eng, want.data());
          dnnl::reorder(src, dst).execute(strm, src, dst);
          strm.wait();
          std::vector<uint8_t> got(layout->bytes + 1, 0xEE);
          cpu::pack_b_s8(*layout, b.data(), s.k, s.n, ld, transposed, got.data());
          EXPECT_EQ(got.back(), 0xEE) << "wrote past the packed buffer";
          got.pop_back();
          // The blocks, then (compensated) one int32 per padded column: oneDNN's buffer has
          // room past them that its reorder leaves unwritten (still 0xCD), as its GEMM reads
          // nothing there.
          const size_t written =
              comp ? layout->comp_offset + static_cast<size_t>(layout->padded_n) * 4 : want.size();
          ASSERT_LE(written, want.size());
          size_t first = 0;
          while (first < written && got[first] == want[first]) ++first;
          ASSERT_EQ(first, written) << "first differing byte";
        }
    }
  }
}

// Integer-valued bf16 in [-8, 8].
std::vector<uint16_t> small_integers(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> f(count);
  for (auto& v : f) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
  std::vector<uint16_t> out(count);
  commfuse::convert(f.data(), DType::kFloat32, out.data(), DType::kBFloat16, count);
  return out;
}

TEST(PackedB, GemmOverPackedBEqualsPlainGemm) {
  bool any = false;
  for (const Shape& s : {Shape{256, 256, 256}, Shape{4096, 64, 64}, Shape{100, 70, 96}}) {
    for (const int64_t m : {1, 7, 128}) {
      SCOPED_TRACE(testing::Message() << "m=" << m << " k=" << s.k << " n=" << s.n);
      cpu::MatmulDesc d = cpu::dense_matmul_desc(m, s.k, s.n, DType::kBFloat16);
      d.ldb = s.ldb;
      d.c_dtype = DType::kFloat32;
      // Native wherever a native kernel exists: the timed model may take fp32 for some of
      // these shapes on a busy machine (tests run two at a time), which reads b plain.
      d.half_path = cpu::HalfPath::kNative;
      bool packed = false;
      cpu::MatmulDesc probe = d;
      probe.b_packed = true;
      const auto* layout = cpu::packed_b_layout(*cpu::plan_matmul(probe));
      const auto plan = cpu::plan_matmul_over(d, layout, &packed);
      EXPECT_EQ(packed, layout != nullptr);
      if (layout == nullptr) continue;  // no native kernel reading packed bf16 here
      any = true;
      EXPECT_NE(cpu::describe(*plan).find("b packed once"), std::string::npos);
      const auto a = small_integers(static_cast<size_t>(m * s.k), 1);
      const auto b = small_integers(static_cast<size_t>(s.k * s.ldb), 2);
      std::vector<uint8_t> pb(layout->bytes);
      cpu::pack_b(*layout, b.data(), s.k, s.n, s.ldb, pb.data());
      std::vector<float> want(static_cast<size_t>(m * s.n)), got(want.size());
      cpu::matmul(d, a.data(), b.data(), nullptr, want.data());
      cpu::matmul(*plan, a.data(), pb.data(), nullptr, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
    }
  }
  if (!any) GTEST_SKIP() << "no native bf16 kernel reads a packed b on this CPU / ISA cap";
}

TEST(PackedB, TransposedOrWidenedPlansReadBPlain) {
  cpu::MatmulDesc d = cpu::dense_matmul_desc(64, 128, 128, DType::kBFloat16, true);
  d.b_packed = true;
  EXPECT_EQ(cpu::packed_b_layout(*cpu::plan_matmul(d)), nullptr);
  cpu::MatmulDesc f = cpu::dense_matmul_desc(64, 128, 128, DType::kFloat32);
  f.b_packed = true;
  EXPECT_EQ(cpu::packed_b_layout(*cpu::plan_matmul(f)), nullptr);
}

TEST(PackedB, PackingPolicyFollowsCallsAndThePin) {
  unsetenv("COMMFUSE_PACK_X2");
  EXPECT_TRUE(cpu::packing_pays(0));     // blocks multiplied as they arrive
  EXPECT_TRUE(cpu::packing_pays(2048));  // one call of many rows
  EXPECT_FALSE(cpu::packing_pays(2));    // tiny: the pack costs what it saves
  setenv("COMMFUSE_PACK_X2", "never", 1);
  EXPECT_FALSE(cpu::packing_pays(0));
  setenv("COMMFUSE_PACK_X2", "always", 1);
  EXPECT_TRUE(cpu::packing_pays(2));
  unsetenv("COMMFUSE_PACK_X2");
}

}  // namespace

// rows only picks the layout: a hint past what any GEMM call multiplies (oneDNN's 32-bit
// sizes) packs as for the largest call, where it crashed inside oneDNN (SIGFPE at 2^37 rows
// of a 64 x 64 int8 x2), for every x2 dtype that packs.
TEST(PackedB, HugeRowsHintPacksAsTheLargestCall) {
  const int64_t k = 64, n = 64;
  const int64_t largest = ((int64_t{1} << 31) - 1) / k;
  std::vector<int8_t> b8(k * n, 3);
  std::vector<uint16_t> b16(k * n, 0x3f80);  // bfloat16 1.0
  const commfuse::TensorView x8(b8.data(), commfuse::DType::kInt8, {k, n});
  const commfuse::TensorView x16(b16.data(), commfuse::DType::kBFloat16, {k, n});
  for (const commfuse::TensorView& x2 : {x8, x16}) {
    const commfuse::PackedWeight as_largest(x2, largest);
    for (const int64_t rows : {int64_t{1} << 37, int64_t{1} << 40, INT64_MAX}) {
      const commfuse::PackedWeight w(x2, rows);
      EXPECT_EQ(w.packed(), as_largest.packed()) << rows;
      EXPECT_EQ(w.packed_bytes(), as_largest.packed_bytes()) << rows;
      EXPECT_EQ(w.description(), as_largest.description()) << rows;
    }
  }
}
