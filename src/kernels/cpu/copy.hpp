// The byte copy every transport and operator uses for bulk data. glibc's memcpy moves
// copies of 4 KiB and more with `rep movsb` on CPUs that advertise fast string moves, and
// on AMD Zen 3 (seen here: a 2-core EPYC VM, glibc 2.36) `rep movsb` runs at 1.5 GB/s
// instead of 25-35 GB/s whenever source and destination differ in alignment within a
// cache line — a 64 KiB all_gather took 38 us instead of 10. There this copy uses vector
// loads and stores (AVX2 where the ISA cap allows, else SSE2), aligned to the destination,
// so its speed does not depend on the buffers' alignment. Where memcpy has no such
// pathology (measured once: memcpy_is_fast) it is used, being much faster on lines another
// core has just written (the shm slots; Intel Xeon with AMX: 5x at 32 KiB). Copies larger
// than this core's share of the last-level cache use the loop's non-temporal stores, whose
// destination would only evict the data a peer is about to read.
#pragma once

#include <cstddef>

namespace commfuse::kernels::cpu {

// memmove semantics: any n (0 too, with null pointers), overlapping ranges allowed.
void copy(void* dst, const void* src, size_t n);

// Whether this process uses glibc's memcpy below the non-temporal size: it copied a 64 KiB
// buffer misaligned against its destination at least half as fast as the vector loop
// (measured once).
bool memcpy_is_fast();

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
