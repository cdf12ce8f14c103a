// The cores one host's ranks share, from the CPU lists they exchange at set-up (shm and MPI
// alike): ranks confined together to a cpuset share its cores however many the host has
// online, and ranks whose first threads OpenMP pinned (OMP_PROC_BIND) wait on fewer still.
#pragma once

#include <string>
#include <vector>

namespace commfuse::comm {

struct HostCores {
  int cores = 1;    // the union of the ranks' compute CPU sets (kernels::cpu::compute_cpu_list)
  int waiting = 1;  // at most cores: the union of their calling threads' masks, where they wait
};

// From each local rank's two lists (the same records on every rank, so every rank gets the
// same answer); the online cores where a rank could not read a list.
HostCores host_cores(const std::vector<std::string>& cpu_lists,
                     const std::vector<std::string>& thread_cpu_lists);

// What a host's ranks could run on: its online CPUs, or its container's cpuset where that
// allows fewer (cgroup: cpu::cgroup_cpus, 0 unknown).
int cpus_available(int online, int cgroup);
// Whether the ranks' masks leave them fewer CPUs to wait on than both their number and what
// is available. Ranks in a 2-CPU container of a large host are not short (they warned at
// every init when compared with the host's online CPUs).
bool affinity_leaves_short(int ranks, int waiting, int available);

// Call on one rank a host: warns where the ranks wait on fewer CPUs than both their number
// and what the host has online (or their container's cpuset allows): their affinity, not
// the host, leaves them short.
void warn_if_affinity_short(int ranks, const HostCores& h);

}  // namespace commfuse::comm
