// kernels::cpu::copy (kernels/cpu/copy.hpp): every length around its vector widths and
// thresholds, every source/destination misalignment within a cache line, overlapping
// ranges, and a copy large enough for the non-temporal stores. The AVX2-capped ASan run of
// `make test` runs the same cases on the AVX2 copy, unit_tests_isa_sse41 on the SSE2 one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/copy.hpp"

namespace commfuse {
namespace {

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

// Copies n bytes from src+so to dst+dof inside 64-byte guard bands and checks both the
// copy and that nothing around it was touched.
void check_copy(size_t n, size_t so, size_t dof) {
  const size_t guard = 64;
  const auto src = pattern(n + so + guard, static_cast<uint32_t>(n + so));
  std::vector<uint8_t> dst(n + dof + 2 * guard, 0xA5);
  kernels::cpu::copy(dst.data() + guard + dof, src.data() + so, n);
  ASSERT_EQ(std::memcmp(dst.data() + guard + dof, src.data() + so, n), 0)
      << "n " << n << " src offset " << so << " dst offset " << dof;
  for (size_t i = 0; i < guard + dof; ++i) ASSERT_EQ(dst[i], 0xA5) << "byte before, n " << n;
  for (size_t i = guard + dof + n; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], 0xA5) << "byte after, n " << n;
}

TEST(Copy, EveryLengthAroundTheThresholds) {
  for (size_t n = 0; n <= 1300; ++n) check_copy(n, 3, 5);
  for (size_t n : {4095u, 4096u, 4097u, 65536u + 33u, 1048576u - 1u})
    for (size_t so : {0u, 1u, 16u, 31u, 32u, 63u})
      for (size_t dof : {0u, 1u, 15u, 32u, 33u}) check_copy(n, so, dof);
}

// Every distance of the destination past the source modulo 4 KiB that the once-per-process
// measurement tells apart (0..63, and 2048 + 0..63 for the rest), the destination before the
// source too, at a length inside glibc's `rep movsb` range: whichever copy this CPU takes
// there (COMMFUSE_COPY_LOOP=all and =none: copy_loop_all / copy_loop_none) is exact.
TEST(Copy, EveryDistanceWithinAPageIsExact) {
  constexpr size_t n = 32 * 1024 + 5;
  const auto src = pattern(n + 4096, 77);
  std::vector<uint8_t> dst(n + 3 * 4096, 0xA5);
  const size_t s0 = (4096 - reinterpret_cast<uintptr_t>(src.data()) % 4096) % 4096;
  // A page start inside dst, at least one byte in: to[-1] must be dst's own byte (where
  // dst.data() itself was page-aligned, distance 0 read the byte before the vector: seen
  // once in a fresh `make test`, the heap's 0 in place of the 0xA5 guard).
  const size_t d0 = 4096 - reinterpret_cast<uintptr_t>(dst.data()) % 4096;
  std::vector<size_t> distances;
  for (size_t d = 0; d < 64; ++d) distances.insert(distances.end(), {d, 2048 + d, 4096 - 1 - d});
  for (const size_t d : distances) {
    std::fill(dst.begin(), dst.end(), 0xA5);
    uint8_t* to = dst.data() + d0 + d;
    kernels::cpu::copy(to, src.data() + s0, n);
    ASSERT_EQ(std::memcmp(to, src.data() + s0, n), 0) << "distance " << d;
    ASSERT_EQ(to[-1], 0xA5) << "distance " << d;
    ASSERT_EQ(to[n], 0xA5) << "distance " << d;
  }
}

// The rule of the measurement: slow where memcpy took over twice the loop's time, bit i for
// distance i; exactly twice is not slow.
TEST(Copy, SlowDistancesAreWhereMemcpyTookOverTwiceTheLoop) {
  double mem[64], loop[64];
  for (int i = 0; i < 64; ++i) {
    loop[i] = 1.0;
    mem[i] = i >= 1 && i <= 15 ? 14.0 : (i == 20 ? 2.0 : (i == 40 ? 2.01 : 0.9));
  }
  EXPECT_EQ(kernels::cpu::slow_distances(mem, loop), uint64_t{0xFFFE} | uint64_t{1} << 40);
  for (int i = 0; i < 64; ++i) mem[i] = 1.9;
  EXPECT_EQ(kernels::cpu::slow_distances(mem, loop), 0u);
}

// Which mask a pair of addresses reads: the distance of dst past src modulo 4 KiB, `near`
// below 64, else `far` at the distance modulo 64 (dst below src wraps around the page).
TEST(Copy, SlowCopyDistancesReadTheDistanceModuloAPage) {
  const kernels::cpu::SlowCopyDistances s{uint64_t{1} << 8, uint64_t{1} << 3};
  auto* base = reinterpret_cast<uint8_t*>(uintptr_t{1} << 20);
  EXPECT_TRUE(s.slow(base + 8, base));
  EXPECT_TRUE(s.slow(base + 4096 + 8, base));
  EXPECT_TRUE(s.slow(base + 8, base + 4096));  // 8 past, a page back
  EXPECT_FALSE(s.slow(base + 3, base));        // near: bit 3 clear
  EXPECT_TRUE(s.slow(base + 64 + 3, base));    // far: bit 3 set
  EXPECT_TRUE(s.slow(base, base + 61));        // 4035 past: far bit 3
  EXPECT_FALSE(s.slow(base + 64 + 8, base));   // far: bit 8 clear
  EXPECT_FALSE(s.slow(base, base));
}

// The vector loop, which `copy` takes only where memcpy is slow (and for non-temporal
// copies), on every machine: lengths around its vector widths, misalignments, both stores.
TEST(Copy, TheVectorLoopIsExactEverywhere) {
  for (const bool nt : {false, true})
    for (size_t n : {128u, 129u, 255u, 1000u, 4097u, 65536u + 33u})
      for (size_t so : {0u, 1u, 31u, 63u})
        for (size_t dof : {0u, 1u, 33u}) {
          const auto src = pattern(n + so, static_cast<uint32_t>(n * 3 + so));
          std::vector<uint8_t> dst(n + dof + 64, 0xA5);
          kernels::cpu::copy_vector_loop(dst.data() + dof, src.data() + so, n, nt);
          ASSERT_EQ(std::memcmp(dst.data() + dof, src.data() + so, n), 0)
              << "n " << n << " so " << so << " dof " << dof << " nt " << nt;
          for (size_t i = 0; i < dof; ++i) ASSERT_EQ(dst[i], 0xA5);
          for (size_t i = dof + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5);
        }
}

// Rows streamed one after another, fenced once (quant_all_reduce's float32 output).
TEST(Copy, UnfencedStreamedRowsAreExactAfterTheFence) {
  for (size_t n : {0u, 5u, 127u, 128u, 129u, 512u, 4096u + 36u})
    for (size_t dof : {0u, 4u, 33u}) {
      const auto src = pattern(3 * n, static_cast<uint32_t>(n + dof));
      std::vector<uint8_t> dst(3 * n + dof + 64, 0xA5);
      for (size_t row = 0; row < 3; ++row)
        kernels::cpu::stream_copy_unfenced(dst.data() + dof + row * n, src.data() + row * n, n);
      kernels::cpu::stream_fence();
      // std::equal: an empty src has no data() that memcmp may take.
      ASSERT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + static_cast<ptrdiff_t>(dof)))
          << "n " << n << " dof " << dof;
      for (size_t i = 0; i < dof; ++i) ASSERT_EQ(dst[i], 0xA5);
      for (size_t i = dof + 3 * n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5);
    }
}

TEST(Copy, NonTemporalCopiesAreExact) {
  const size_t n = kernels::cpu::nontemporal_copy_bytes() + 4099;
  if (const char* pinned = std::getenv("COMMFUSE_NONTEMPORAL_BYTES");
      pinned != nullptr && std::atoll(pinned) > 0) {
    EXPECT_EQ(kernels::cpu::nontemporal_copy_bytes(), static_cast<size_t>(std::atoll(pinned)));
  } else {  // the cache share, clamped
    EXPECT_GE(kernels::cpu::nontemporal_copy_bytes(), size_t{1} << 20);
    EXPECT_LE(kernels::cpu::nontemporal_copy_bytes(), size_t{16} << 20);
  }
  check_copy(n, 7, 0);
  check_copy(n, 0, 13);
}

TEST(Copy, OverlappingRangesMoveLikeMemmove) {
  for (size_t n : {100u, 5000u, 70000u})
    for (long shift : {-33L, -1L, 1L, 64L, 999L}) {
      std::vector<uint8_t> buf = pattern(n + 2000, static_cast<uint32_t>(n));
      std::vector<uint8_t> want = buf;
      const size_t from = 1000, to = static_cast<size_t>(1000 + shift);
      std::memmove(want.data() + to, want.data() + from, n);
      kernels::cpu::copy(buf.data() + to, buf.data() + from, n);
      ASSERT_EQ(buf, want) << "n " << n << " shift " << shift;
    }
}

TEST(Copy, EmptyAndSelfCopiesDoNothing) {
  kernels::cpu::copy(nullptr, nullptr, 0);
  std::vector<uint8_t> v = pattern(5000, 9);
  const std::vector<uint8_t> before = v;
  kernels::cpu::copy(v.data(), v.data(), v.size());
  EXPECT_EQ(v, before);
}

}  // namespace
}  // namespace commfuse
