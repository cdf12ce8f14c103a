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
// copy of each block a peer would read through the slots but adds a closing
// synchronization (no rank may return while a peer still reads its buffer): it pays once
// the saved copies take as long as that synchronization — about 2 us with a core per rank,
// about 20 us when ranks share cores (a wait then costs a context switch; measured at W=4
// on 2 cores, docs/algorithms.md). The copy bandwidth is measured
// here, once per process (a 256 KiB copy, best of 4); comm_create.cpp uses rank 0's value on
// every rank so they choose alike. Rounded to a power of two in [16 KiB, 4 MiB].
uint64_t cma_crossover_bytes(bool oversubscribed);

// Reads n bytes at `address` in process pid into dst; false (errno set) if the kernel
// refused or the process is gone. Loops over partial transfers.
bool cma_read(pid_t pid, void* dst, uint64_t address, size_t n);

}  // namespace commfuse::comm::shm
