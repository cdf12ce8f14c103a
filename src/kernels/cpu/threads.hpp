// How many threads a rank's compute kernels use (DESIGN "Threads per rank"): ranks on one
// host share its cores, so each takes its share unless COMMFUSE_NUM_THREADS says otherwise.
#pragma once

namespace commfuse::kernels::cpu {

// The number of ranks of this process's communicator that run on this host. The
// communicator layer sets it; until then it is 1. Values < 1 are treated as 1.
void set_local_ranks(int local_ranks);
int local_ranks();

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

// compute_threads_for(COMMFUSE_NUM_THREADS, online cores, local_ranks(),
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
