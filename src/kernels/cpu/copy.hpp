// The byte copy every transport and operator uses for bulk data. glibc's memcpy moves
// copies of 4 KiB and more with `rep movsb` on CPUs that advertise fast string moves, and
// on AMD Zen 3 (seen here: a 2-core EPYC VM, glibc 2.36) `rep movsb` runs at 1.5 GB/s
// instead of 25-35 GB/s whenever source and destination differ in alignment within a
// cache line — a 64 KiB all_gather took 38 us instead of 10. This copy uses vector loads
// and stores (AVX2 where the ISA cap allows, else SSE2), aligned to the destination, so
// its speed does not depend on the buffers' alignment, and non-temporal stores for copies
// larger than this core's share of the last-level cache, whose destination would only
// evict the data a peer is about to read.
#pragma once

#include <cstddef>

namespace commfuse::kernels::cpu {

// memmove semantics: any n (0 too, with null pointers), overlapping ranges allowed.
void copy(void* dst, const void* src, size_t n);

// Copies of at least this many bytes use non-temporal stores: the last-level cache per
// online core (sysconf), clamped to [1 MiB, 16 MiB] since a virtual machine may report its
// host's whole cache.
size_t nontemporal_copy_bytes();

// This process's rate of `copy` on a cached 256 KiB buffer (best of 4), measured once: the
// copy cost that transports weigh against a synchronization (comm/shm/cma.hpp).
double copy_bytes_per_us();

}  // namespace commfuse::kernels::cpu
