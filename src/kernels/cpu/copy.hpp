// The byte copy every transport and operator uses for bulk data. glibc's memcpy moves
// copies of a few KiB and more with `rep movsb` on CPUs that advertise fast string moves,
// and on AMD (seen here: 2-core EPYC VMs, glibc 2.36) `rep movsb` is 10-15x slower at
// some distances of the destination past the source: Zen 3 at 1.5 GB/s instead of 25-35
// (a 64 KiB all_gather took 38 us instead of 10), Zen 4 at 3.5 GB/s instead of 50 where the
// destination is 1-15 bytes past the source modulo 4 KiB. At those distances this copy
// uses vector loads and stores (AVX2 where the ISA cap allows, else SSE2), aligned to the
// destination, whose speed does not depend on the buffers' alignment. Elsewhere (measured
// once per process: memcpy_slow_distances) memcpy is used, being much faster on lines
// another core has just written (the shm slots; Intel Xeon with AMX: 5x at 32 KiB). Copies
// larger than this core's share of the last-level cache use the loop's non-temporal
// stores, whose destination would only evict the data a peer is about to read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace commfuse::kernels::cpu {

// memmove semantics: any n (0 too, with null pointers), overlapping ranges allowed.
void copy(void* dst, const void* src, size_t n);

// Where this process copies with the vector loop rather than glibc's memcpy below the
// non-temporal size, by the distance of the destination past the source modulo 4 KiB: bit d
// of `near` for a distance d < 64, bit d mod 64 of `far` for the rest (measured once per
// process at 64 distances of each kind: memcpy over twice as slow as the loop there; both
// 0 where memcpy has no such pathology).
struct SlowCopyDistances {
  uint64_t near = 0, far = 0;
  bool slow(const void* dst, const void* src) const {
    const auto d = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
    return ((d < 64 ? near : far) >> (d & 63) & 1) != 0;
  }
};
const SlowCopyDistances& memcpy_slow_distances();

// The rule behind it, from the two copies' best times at 64 distances: bit i set where
// memcpy_us[i] > 2 * loop_us[i] (tests).
uint64_t slow_distances(const double* memcpy_us, const double* loop_us);

// The probe behind it, for any copy: `timed` and `reference` return a copy's time of n
// bytes from src to dst (probe_timing.hpp's best_probe_ns), the two at the same distance; taken at
// each distance of dst past src modulo 4 KiB of 0..63 (near) and 2048 + 0..63 (far), kProbeBytes in
// cache (above glibc's `rep movsb` threshold, below where it stops using it). A distance is slow
// where `timed` took over twice as long as `reference` in both of two trials (buffers of their own,
// destinations placed differently above 4 KiB).
inline constexpr size_t kProbeBytes = 32 * 1024;
using DistanceTimer = double (*)(uint8_t* dst, const uint8_t* src, size_t n);
SlowCopyDistances find_slow_distances(DistanceTimer timed, DistanceTimer reference);
// COMMFUSE_COPY_LOOP's pin where it pins (all: every distance slow, none: none), else
// find_slow_distances: what memcpy_slow_distances and comm/shm's cma_slow_distances hold.
SlowCopyDistances pinned_or_found(DistanceTimer timed, DistanceTimer reference);

// The vector loop itself (tests: `copy` may not take it on this CPU); memcpy below 128 bytes.
void copy_vector_loop(void* dst, const void* src, size_t n, bool nontemporal);

// Non-temporal stores without the store fence that copy_vector_loop ends with, for many
// short copies (rows) that end with one stream_fence(): a fence after every 4 KiB row made
// quant_all_reduce's float32 sum of 4 Mi elements 1.6x slower than summing in place, one
// per call 1.2x faster (W = 2 over TCP, AMX Xeon). Only whole destination lines stream;
// the partial ones at either end are ordinary stores. Any n, no overlap. Until the fence
// the bytes may not be visible to other threads (this thread reads them back in order).
void stream_copy_unfenced(void* dst, const void* src, size_t n);
void stream_fence();

// Copies of at least this many bytes use non-temporal stores: the last-level cache per
// online core (sysconf), clamped to [1 MiB, 16 MiB] since a virtual machine may report its
// host's whole cache; COMMFUSE_NONTEMPORAL_BYTES pins it (the tests set it low so that
// small cases take the streaming paths). Read once per process; a bad value throws
// INVALID_ARGUMENT (communicator creation reads it, so it fails there at the latest).
size_t nontemporal_copy_bytes();

// This process's rate of `copy` on a cached 256 KiB buffer (best of 4), measured once: the
// copy cost that transports weigh against a synchronization (comm/shm/cma.hpp).
double copy_bytes_per_us();

}  // namespace commfuse::kernels::cpu
