#include "kernels/cpu/copy.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/params.hpp"
#include "kernels/cpu/probe_timing.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CF_COPY_X86 1
#endif

namespace commfuse::kernels::cpu {
namespace {

// Below this glibc copies with vector moves itself (its `rep movsb` threshold is 2 KiB or
// more), and a call to memcpy is the cheapest small copy, on every CPU.
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

// The last-level cache's share per CPU that shares it (sysfs says how many do; else the
// online cores).
size_t compute_nontemporal_bytes() {
  const ::commfuse::cpu::CacheInfo llc = ::commfuse::cpu::last_level_cache();
  const int sharing = llc.shared_cpus > 0 ? llc.shared_cpus : ::commfuse::cpu::online_cores();
  const size_t share = llc.bytes / static_cast<size_t>(std::max(1, sharing));
  return std::clamp<size_t>(share, size_t{1} << 20, size_t{16} << 20);
}

}  // namespace

size_t nontemporal_copy_bytes() {
  static const size_t bytes = [] {
    const int64_t pinned = params::get_int("COMMFUSE_NONTEMPORAL_BYTES");
    return pinned > 0 ? static_cast<size_t>(pinned) : compute_nontemporal_bytes();
  }();
  return bytes;
}

namespace {

// The vector loop (non-temporal stores or not), n >= 128 bytes, no overlap.
void copy_loop(void* dst, const void* src, size_t n, bool nontemporal) {
#ifdef CF_COPY_X86
  if (::commfuse::cpu::use_avx2())
    copy_avx2(dst, src, n, nontemporal);
  else
    copy_sse2(dst, src, n, nontemporal);
#else
  (void)nontemporal;
  std::memcpy(dst, src, n);
#endif
}

// Where glibc's memcpy is pathological (find_slow_distances; the vector loop at the same
// distance is the reference). One probe does not do: AMD Zen 3's `rep movsb` ran 1.5 GB/s
// instead of 25-35 at misalignments an earlier single probe (at 51 bytes) found; this AMD
// EPYC (Zen 4) VM copies at 50-57 GB/s except where the destination is 1-15 bytes past the
// source modulo 4 KiB, at 3.5 GB/s there (41 at 17-31), which that probe missed: a W = 2
// all_gather whose blocks are 512 KiB + 8 bytes took 176-186 us through the slots, 38-46 us
// with the loop at those copies. Elsewhere memcpy is kept: it is the faster copy of lines
// another core has just written, which is what the shm slots hold (all_gather at W = 2
// through the slots took 2.2 us for 2 KiB blocks and 12.8 us for 32 KiB with the loop's
// aligned AVX2 stores, 0.6 and 2.2 us with memcpy, AMX Xeon; OpenMPI 1.0 and 2.7).
SlowCopyDistances measure_memcpy_slow_distances() {
  return pinned_or_found(
      [](uint8_t* d, const uint8_t* s, size_t n) {
        return best_probe_ns([&] { std::memcpy(d, s, n); }, 3, true);
      },
      [](uint8_t* d, const uint8_t* s, size_t n) {
        return best_probe_ns([&] { copy_loop(d, s, n, false); }, 3, true);
      });
}

// `copy` below the non-temporal size: glibc's memcpy except at the distances where it is
// pathological on this CPU (memcpy_slow_distances), the loop there, from the size where
// glibc would switch to `rep movsb`.
void cached_copy(void* dst, const void* src, size_t n) {
  if (n >= kSmallCopyBytes && memcpy_slow_distances().slow(dst, src))
    copy_loop(dst, src, n, false);
  else
    std::memcpy(dst, src, n);
}

}  // namespace

uint64_t slow_distances(const double* memcpy_us, const double* loop_us) {
  uint64_t mask = 0;
  for (int dist = 0; dist < 64; ++dist)
    if (memcpy_us[dist] > 2 * loop_us[dist]) mask |= uint64_t{1} << dist;
  return mask;
}

SlowCopyDistances find_slow_distances(DistanceTimer timed, DistanceTimer reference) {
  // Two trials, each with buffers of its own (other pages) and a destination placed
  // differently above 4 KiB; a distance is slow only where it is slow in both. The
  // distance modulo 4 KiB is what the copies' speed follows (AMD EPYC Zen 4: 1-15 bytes,
  // 3-4 GB/s whatever else), but not all of it: at 33-63 bytes memcpy ran 26-55 GB/s by
  // the bits above 4 KiB and by the pages, and about one process in 12 found those
  // distances slow in one trial, even timed twice in a row. Two trials also keep one
  // preemption from marking a distance.
  constexpr size_t kAlign = size_t{64} << 10;
  constexpr size_t kPlaces[2] = {size_t{64} << 10, size_t{132} << 10};
  SlowCopyDistances slow{~uint64_t{0}, ~uint64_t{0}};
  for (const size_t place : kPlaces) {
    std::vector<uint8_t> buf(kAlign + place + 4096 + kProbeBytes, 1);
    uint8_t* s = buf.data() + (kAlign - reinterpret_cast<uintptr_t>(buf.data()) % kAlign) % kAlign;
    double us[128], ref_us[128];
    for (int i = 0; i < 128; ++i) {
      uint8_t* d = s + place + (i < 64 ? i : 2048 + (i - 64));
      us[i] = timed(d, s, kProbeBytes);
      ref_us[i] = reference(d, s, kProbeBytes);
    }
    slow.near &= slow_distances(us, ref_us);
    slow.far &= slow_distances(us + 64, ref_us + 64);
  }
  return slow;
}

SlowCopyDistances pinned_or_found(DistanceTimer timed, DistanceTimer reference) {
  const std::string pin = params::get_string("COMMFUSE_COPY_LOOP");
  if (pin == "all") return SlowCopyDistances{~uint64_t{0}, ~uint64_t{0}};
  if (pin == "none") return SlowCopyDistances{};
  return find_slow_distances(timed, reference);
}

const SlowCopyDistances& memcpy_slow_distances() {
  static const SlowCopyDistances slow = measure_memcpy_slow_distances();
  return slow;
}

void copy(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return;
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  const bool overlap = d < s + n && s < d + n;
  if (overlap) {
    std::memmove(dst, src, n);
    return;
  }
  // Non-temporal stores for the largest copies (never under the loop's 128 bytes: a
  // COMMFUSE_NONTEMPORAL_BYTES below that sent 1-127-byte copies to a loop that wrote past
  // them).
  if (n >= 128 && n >= nontemporal_copy_bytes())
    copy_loop(dst, src, n, true);
  else
    cached_copy(dst, src, n);
}

void copy_vector_loop(void* dst, const void* src, size_t n, bool nontemporal) {
  if (n < 128) {
    std::memcpy(dst, src, n);
    return;
  }
  copy_loop(dst, src, n, nontemporal);
}

#ifdef CF_COPY_X86
namespace {

// Whole destination lines only, each by non-temporal stores: a line also written by an
// ordinary store (copy_loop's overlapping head and tail) is flushed from the write-combining
// buffer half full, which per 4 KiB row made the streamed sum slower than the in-place one.
__attribute__((target("avx2"))) void stream_lines_avx2(uint8_t* d, const uint8_t* s, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
  }
}

void stream_lines_sse2(uint8_t* d, const uint8_t* s, size_t n) {
  for (size_t i = 0; i < n; i += 64)
    for (size_t j = 0; j < 64; j += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + j),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + j)));
}

}  // namespace
#endif

void stream_copy_unfenced(void* dst, const void* src, size_t n) {
  if (n == 0) return;  // the pointers may be null then (memcpy's arguments may not)
#ifdef CF_COPY_X86
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // The partial lines at either end by memcpy, the whole lines between streamed.
  const size_t head = std::min(n, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  const size_t lines = (n - head) / 64 * 64;
  std::memcpy(d, s, head);
  if (::commfuse::cpu::use_avx2())
    stream_lines_avx2(d + head, s + head, lines);
  else
    stream_lines_sse2(d + head, s + head, lines);
  std::memcpy(d + head + lines, s + head + lines, n - head - lines);
#else
  std::memcpy(dst, src, n);
#endif
}

void stream_fence() {
#ifdef CF_COPY_X86
  _mm_sfence();
#endif
}

double copy_bytes_per_us() {
  static const double rate = [] {
    constexpr size_t kBytes = 256 * 1024;
    std::vector<uint8_t> a(kBytes, 1), b(kBytes);
    double best = 0;
    for (int i = 0; i < 4; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      // The cached copy `copy` makes of this size by default (not a non-temporal one where
      // COMMFUSE_NONTEMPORAL_BYTES is pinned below it).
      cached_copy(b.data(), a.data(), kBytes);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (us > 0) best = std::max(best, kBytes / us);
    }
    return best > 0 ? best : 10000.0;  // a clock too coarse to tell: 10 GB/s
  }();
  return rate;
}

}  // namespace commfuse::kernels::cpu
