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

// Call on one rank a host: warns where `ranks` outnumber the CPUs they wait on although the
// host has that many online (their affinity, not the host, leaves them short).
void warn_if_affinity_short(int ranks, const HostCores& h);

}  // namespace commfuse::comm
