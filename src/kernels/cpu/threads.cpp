#include "kernels/cpu/threads.hpp"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/params.hpp"

namespace commfuse::kernels::cpu {
namespace {
// The local ranks (low 32 bits) and host cores (high 32 bits, 0: the online cores) in one
// word, so that a reader never sees one setting's ranks with another's cores.
std::atomic<uint64_t> g_local_share{1};

uint64_t pack_share(int ranks, int cores) {
  return static_cast<uint64_t>(static_cast<uint32_t>(std::max(1, ranks))) |
         static_cast<uint64_t>(static_cast<uint32_t>(std::max(0, cores))) << 32;
}

// The calling thread's affinity mask, sorted; empty where it cannot be read.
std::vector<int> calling_thread_cpu_ids() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> ids;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) ids.push_back(c);
  return ids;
}

// This process's compute CPUs (allowed_compute_cores' set), sorted; empty where unknown.
std::vector<int> compute_cpu_ids() {
  std::set<int> ids;
  if (omp_get_proc_bind() != omp_proc_bind_false) {
    for (int p = 0; p < omp_get_num_places(); ++p) {
      std::vector<int> place(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
      omp_get_place_proc_ids(p, place.data());
      ids.insert(place.begin(), place.end());
    }
  }
  if (ids.empty()) return calling_thread_cpu_ids();
  return {ids.begin(), ids.end()};
}

}  // namespace

void set_local_ranks(int n, int host_cores) {
  g_local_share.store(pack_share(n, host_cores), std::memory_order_relaxed);
}

int local_ranks() {
  return static_cast<int>(g_local_share.load(std::memory_order_relaxed) & 0xffffffffu);
}

int host_cores_setting() {
  return static_cast<int>(g_local_share.load(std::memory_order_relaxed) >> 32);
}

int host_cores() {
  // Cached: compute_threads() runs on every GEMM call, and sysconf reads sysfs each time.
  static const int online = commfuse::cpu::online_cores();
  const int set = host_cores_setting();
  return set > 0 ? set : online;
}

std::string compute_cpu_list() {
  return commfuse::cpu::format_id_list(compute_cpu_ids());
}

std::string calling_thread_cpu_list() {
  return commfuse::cpu::format_id_list(calling_thread_cpu_ids());
}

int cpus_in_union(const std::vector<std::string>& lists) {
  std::set<int> all;
  for (const std::string& l : lists)
    if (!commfuse::cpu::parse_cpu_list(l, all)) return 0;
  return static_cast<int>(all.size());
}

int compute_threads_for(int override_threads, int cores, int local, int allowed) {
  if (override_threads > 0) return override_threads;
  return std::max(1, std::min(allowed, cores / std::max(1, local)));
}

bool core_left_free(int override_threads, int cores, int local_ranks, int allowed) {
  const int64_t local = std::max(1, local_ranks);
  const int threads = compute_threads_for(override_threads, cores, local_ranks, allowed);
  return local * threads < cores && threads < allowed;
}

int allowed_compute_cores() {
  static const int allowed = [] {
    const int online = commfuse::cpu::online_cores();
    if (omp_get_proc_bind() == omp_proc_bind_false) return commfuse::cpu::allowed_cores();
    std::set<int> procs;
    for (int p = 0; p < omp_get_num_places(); ++p) {
      std::vector<int> ids(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
      omp_get_place_proc_ids(p, ids.data());
      procs.insert(ids.begin(), ids.end());
    }
    if (procs.empty()) return online;  // binding without places: nothing to cap by
    return std::max(1, std::min(static_cast<int>(procs.size()), online));
  }();
  return allowed;
}

int compute_threads() {
  // Cached: this runs on every GEMM call and reading a parameter allocates. If the
  // initializer throws, the next call reads (and reports) the value again.
  static const int override_threads = params::num_threads_override();
  return compute_threads_for(override_threads, host_cores(), local_ranks(),
                             allowed_compute_cores());
}

namespace {
// Other oneDNN runtimes (TBB, threadpool) ignore OpenMP's count; then we leave it alone.
bool onednn_uses_openmp() {
  static const bool omp = dnnl_version()->cpu_runtime == DNNL_RUNTIME_OMP;
  return omp;
}
}  // namespace

ScopedComputeThreads::ScopedComputeThreads(int n) {
  if (!onednn_uses_openmp()) return;
  const int current = omp_get_max_threads();
  if (current == n) return;
  previous_ = current;
  omp_set_num_threads(n);
}

ScopedComputeThreads::~ScopedComputeThreads() {
  if (previous_ > 0) omp_set_num_threads(previous_);
}

}  // namespace commfuse::kernels::cpu
