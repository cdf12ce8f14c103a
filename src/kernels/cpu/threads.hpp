// How many threads a rank's compute kernels use (DESIGN "Threads per rank"): ranks on one
// host share its cores, so each takes its share unless COMMFUSE_NUM_THREADS says otherwise.
#pragma once

#include <string>
#include <vector>

namespace commfuse::kernels::cpu {

// The number of ranks of this process's communicator that run on this host, and the cores
// they may run on together (host_cores: the union of their compute_cpu_list()s; 0 = the
// online cores). The communicator layer sets them; until then 1 and the online cores.
// Values < 1 are treated as 1 (ranks) and as unknown (cores).
void set_local_ranks(int local_ranks, int host_cores);
int local_ranks();
// The cores this host's ranks share: set_local_ranks's host_cores, else the online cores.
int host_cores();
// set_local_ranks's host_cores as set (0: unknown), to restore a setting as it was.
int host_cores_setting();

// The CPUs this process's compute threads may run on (allowed_compute_cores' set) as a
// list of ranges, "0-3,8"; empty where it cannot be read. What the ranks of one host
// exchange at set-up: ranks confined together (a container's or a job's cpuset) share
// those cores however many the host has online, where ranks each bound to their own core
// do not.
std::string compute_cpu_list();
// The calling thread's own CPU list, in the same form: where OpenMP binds threads
// (OMP_PROC_BIND), libgomp pins each process's first thread to the first place before main,
// so ranks that nothing else binds all wait (and communicate) on the same CPUs, whatever
// their compute CPU sets.
std::string calling_thread_cpu_list();
// The number of CPUs in the union of such lists; 0 where any is empty or malformed (the
// caller then falls back on the online cores).
int cpus_in_union(const std::vector<std::string>& lists);

// The rule itself: override if > 0, else max(1, min(allowed, cores / local_ranks)):
// the host's cores shared by its ranks, but never more threads than this process may run
// on (allowed: its affinity mask; a rank that mpirun bound to one core of many runs one
// thread, not cores / local_ranks of them time-sharing it).
int compute_threads_for(int override_threads, int cores, int local_ranks, int allowed);

// Whether local_ranks ranks, each with compute_threads_for(...) threads, leave one of the
// host's cores free, and one this process may run on (for a thread that polls a transport
// beside the computation).
bool core_left_free(int override_threads, int cores, int local_ranks, int allowed);

// The cores this process's compute threads may run on: its affinity mask
// (cpu::allowed_cores), or where OpenMP binds threads (OMP_PROC_BIND / OMP_PLACES) the union
// of OpenMP's places: libgomp then pins the initial thread to the first place before main,
// so that thread's own mask shows one place, not what the process was given.
int allowed_compute_cores();

// compute_threads_for(COMMFUSE_NUM_THREADS, host_cores(), local_ranks(),
// allowed_compute_cores()).
// The variable and the mask are read once (fixed at start); an invalid value throws
// InvalidArgument naming it.
int compute_threads();

// Runs the scope with n threads in oneDNN (its Debian build uses OpenMP, which reads the
// calling thread's OpenMP thread count) and restores the caller's count afterwards, so a
// host application's own OpenMP setting survives our calls.
class ScopedComputeThreads {
 public:
  explicit ScopedComputeThreads(int n);
  ~ScopedComputeThreads();
  ScopedComputeThreads(const ScopedComputeThreads&) = delete;
  ScopedComputeThreads& operator=(const ScopedComputeThreads&) = delete;

 private:
  int previous_ = 0;  // 0: nothing to restore
};

}  // namespace commfuse::kernels::cpu
