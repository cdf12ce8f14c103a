// Cross-memory attach (Linux CMA, process_vm_readv): a rank reads a peer's buffer straight
// into its own, one copy instead of two through the shared slots — how Open MPI's
// shared-memory transport moves large messages. The kernel allows it only where this
// process may ptrace the peer (same uid, Yama ptrace_scope 0 or a ptracer exception, no
// seccomp filter against it, as some container runtimes install), so a group probes it
// once at set-up (comm_create.cpp) and every rank uses it only if every rank could read
// every peer; otherwise the slots carry everything.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cpu/copy.hpp"

namespace commfuse::comm::shm {

// The address of a word in this process whose value is cma_probe_value(getpid()): peers
// read it to find out whether they can read this process at all.
uint64_t cma_probe_address();
uint64_t cma_probe_value(pid_t pid);

// Empty if this process can read the probe word of process `pid` at `address`; else why not
// (errno's text, or "read a wrong value").
std::string cma_probe(pid_t pid, uint64_t address);

// Whether CMA works at all on this host for this user, by reading this process from a child
// (for `commfuse info`; a group decides by cma_probe between its ranks). Empty if it does.
std::string cma_self_check();

// The bytes of copying per rank that CMA must save before all_gather, all_to_all and
// broadcast read the peers in place (docs/algorithms.md "CMA single copy"). CMA saves a
// copy of each block a peer would read through the slots but adds fixed costs: a system
// call per peer block and a closing synchronization (no rank may return while a peer still
// reads its buffer). It pays once the saved copies take as long as those: the system call
// and the copy rate (a cached 256 KiB copy) are measured once per process, `sync_us` is
// one synchronization between two ranks as the group measured it (sync_probe.hpp;
// negative: unknown, taken as 2 us). When ranks share cores a wait is taken to cost a
// context switch (20 us): only a fallback, as such groups time all_to_all both ways at
// set-up instead (ShmTransport::measure_shared_cores; the estimate was 4-16x too
// high there). comm_create.cpp uses rank 0's value on every rank so they choose alike.
// Rounded down to a power of two in [4 KiB, 4 MiB].
uint64_t cma_crossover_bytes(bool oversubscribed, double sync_us);

// One process_vm_readv of a word from this process, in microseconds: best of 16, measured
// once per process.
double cma_syscall_us();

// Half the round trip of a flag bounced between two threads of this process (the cache
// line moving between cores, as between two ranks), in microseconds, measured once;
// negative if no run finished in time. What `commfuse info` reports: a communicator
// measures between its own ranks instead.
double thread_sync_us();
// The same measured afresh each call (`commfuse bench` before and after its ranks run: on
// the AMD EPYC VM it read 0.03 us in some minutes and 0.13-0.16 us in others, and the
// shm slots, the TCP transfers of a fused operator and commfuse's lead over OpenMPI
// followed it).
double measure_thread_sync_us();

// Where a CMA read straight into its destination is slow, by the distance of the destination
// past the source modulo 4 KiB (kernels::cpu::find_slow_distances, against the same read at
// distance 0; measured once per process, by a group that has CMA at set-up): the kernel
// copies with the CPU's string move, and on the AMD EPYC (Zen 4) VM ran 2.9 GB/s instead of
// 13 where the destination is 1-15 bytes past the source, as memcpy does. There a read
// lands in a buffer at the source's page offset first (ShmTransport::read_peer).
// COMMFUSE_COPY_LOOP=all|none pins it (every distance slow / none).
const kernels::cpu::SlowCopyDistances& cma_slow_distances();

// Reads n bytes at `address` in process pid into dst; false (errno set) if the kernel
// refused or the process is gone. Loops over partial transfers.
bool cma_read(pid_t pid, void* dst, uint64_t address, size_t n);

}  // namespace commfuse::comm::shm
