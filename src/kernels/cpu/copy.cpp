#include "kernels/cpu/copy.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu_features.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CF_COPY_X86 1
#endif

namespace commfuse::kernels::cpu {
namespace {

// Below this glibc copies with vector moves itself (its `rep movsb` threshold is 2 KiB or
// more), and a call to memcpy is the cheapest small copy.
constexpr size_t kSmallCopyBytes = 1024;

#ifdef CF_COPY_X86

// One body for both widths: V is the vector, the helpers its loads and stores. The head
// (up to one vector) is copied unaligned so the main loop's stores are aligned; the tail
// is the last 4 vectors, copied unaligned and overlapping what the loop already wrote
// (harmless: source and destination do not overlap here).
#define CF_COPY_LOOP(V, LOADU, STOREOP)                            \
  for (; i < end; i += 4 * kV) {                                   \
    const V a = LOADU(reinterpret_cast<const V*>(s + i));          \
    const V b = LOADU(reinterpret_cast<const V*>(s + i + kV));     \
    const V c = LOADU(reinterpret_cast<const V*>(s + i + 2 * kV)); \
    const V e = LOADU(reinterpret_cast<const V*>(s + i + 3 * kV)); \
    STOREOP(reinterpret_cast<V*>(d + i), a);                       \
    STOREOP(reinterpret_cast<V*>(d + i + kV), b);                  \
    STOREOP(reinterpret_cast<V*>(d + i + 2 * kV), c);              \
    STOREOP(reinterpret_cast<V*>(d + i + 3 * kV), e);              \
  }
#define CF_COPY_BODY(V, LOADU, STOREU, STORE, STREAM)                                      \
  auto* d = static_cast<uint8_t*>(dst);                                                    \
  const auto* s = static_cast<const uint8_t*>(src);                                        \
  constexpr size_t kV = sizeof(V);                                                         \
  STOREU(reinterpret_cast<V*>(d), LOADU(reinterpret_cast<const V*>(s)));                   \
  size_t i = kV - (reinterpret_cast<uintptr_t>(d) & (kV - 1));                             \
  const size_t end = n - 4 * kV;                                                           \
  if (nontemporal) {                                                                       \
    CF_COPY_LOOP(V, LOADU, STREAM)                                                         \
    _mm_sfence(); /* the streamed lines are visible before the flag that publishes them */ \
  } else {                                                                                 \
    CF_COPY_LOOP(V, LOADU, STORE)                                                          \
  }                                                                                        \
  for (size_t t = 4; t > 0; --t)                                                           \
  STOREU(reinterpret_cast<V*>(d + n - t * kV), LOADU(reinterpret_cast<const V*>(s + n - t * kV)))

__attribute__((target("avx2"))) void copy_avx2(void* dst, const void* src, size_t n,
                                               bool nontemporal) {
  CF_COPY_BODY(__m256i, _mm256_loadu_si256, _mm256_storeu_si256, _mm256_store_si256,
               _mm256_stream_si256);
}

void copy_sse2(void* dst, const void* src, size_t n, bool nontemporal) {
  CF_COPY_BODY(__m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_store_si128, _mm_stream_si128);
}

#undef CF_COPY_BODY
#undef CF_COPY_LOOP

#endif  // CF_COPY_X86

size_t compute_nontemporal_bytes() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const size_t share = llc > 0
                           ? static_cast<size_t>(llc) /
                                 static_cast<size_t>(std::max(1, ::commfuse::cpu::online_cores()))
                           : 0;
  return std::clamp<size_t>(share, size_t{1} << 20, size_t{16} << 20);
}

}  // namespace

size_t nontemporal_copy_bytes() {
  static const size_t bytes = compute_nontemporal_bytes();
  return bytes;
}

void copy(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return;
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  const bool overlap = d < s + n && s < d + n;
#ifdef CF_COPY_X86
  if (n >= kSmallCopyBytes && !overlap) {
    const bool nontemporal = n >= nontemporal_copy_bytes();
    if (::commfuse::cpu::use_avx2())
      copy_avx2(dst, src, n, nontemporal);
    else
      copy_sse2(dst, src, n, nontemporal);
    return;
  }
#endif
  if (overlap)
    std::memmove(dst, src, n);
  else
    std::memcpy(dst, src, n);
}

double copy_bytes_per_us() {
  static const double rate = [] {
    constexpr size_t kBytes = 256 * 1024;
    std::vector<uint8_t> a(kBytes, 1), b(kBytes);
    double best = 0;
    for (int i = 0; i < 4; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      kernels::cpu::copy(b.data(), a.data(), kBytes);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (us > 0) best = std::max(best, kBytes / us);
    }
    return best > 0 ? best : 10000.0;  // a clock too coarse to tell: 10 GB/s
  }();
  return rate;
}

}  // namespace commfuse::kernels::cpu
