#include "comm/host_cores.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/cpu_features.hpp"
#include "core/log.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::comm {
namespace {

// The union of real CPU ids needs no clamp to the online count, which a container may show
// differently to each rank.
int cores_of(const std::vector<std::string>& lists) {
  const int n = kernels::cpu::cpus_in_union(lists);
  return n > 0 ? n : cpu::online_cores();
}

}  // namespace

HostCores host_cores(const std::vector<std::string>& cpu_lists,
                     const std::vector<std::string>& thread_cpu_lists) {
  HostCores h;
  h.cores = cores_of(cpu_lists);
  h.waiting = std::min(h.cores, cores_of(thread_cpu_lists));
  return h;
}

int cpus_available(int online, int cgroup) {
  return cgroup > 0 ? std::min(cgroup, online) : online;
}

bool affinity_leaves_short(int ranks, int waiting, int available) {
  return waiting < std::min(ranks, available);
}

void warn_if_affinity_short(int ranks, const HostCores& h) {
  const int cgroup = cpu::cgroup_cpus();
  const int available = cpus_available(cpu::online_cores(), cgroup);
  if (!affinity_leaves_short(ranks, h.waiting, available)) return;
  // OpenMP binds where OMP_PROC_BIND is set to anything but false (any case), or OMP_PLACES is.
  std::string bind = std::getenv("OMP_PROC_BIND") ? std::getenv("OMP_PROC_BIND") : "";
  for (char& ch : bind) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const char* places = std::getenv("OMP_PLACES");
  const bool omp = (!bind.empty() && bind != "false") || (places != nullptr && *places != '\0');
  CF_LOG(kWarn, "comm init: the ", ranks, " ranks here wait on ", h.waiting, " CPU",
         h.waiting == 1 ? "" : "s", " of the ", available,
         available < cpu::online_cores() ? " their cpuset allows" : " online",
         " (their affinity masks), so they run as ranks sharing cores",
         omp ? ": OMP_PROC_BIND / OMP_PLACES pin each OpenMP process's first thread to its "
               "first place, and processes started from one (commfuse launch, spawn) inherit "
               "that; unset them, or bind each rank to its own cores (mpirun --bind-to core)"
             : "");
}

}  // namespace commfuse::comm
