#include "kernels/cpu/threads.hpp"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/params.hpp"

namespace commfuse::kernels::cpu {
namespace {
std::atomic<int> g_local_ranks{1};
}  // namespace

void set_local_ranks(int n) {
  g_local_ranks.store(std::max(1, n), std::memory_order_relaxed);
}

int local_ranks() {
  return g_local_ranks.load(std::memory_order_relaxed);
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
  static const int cores = commfuse::cpu::online_cores();
  return compute_threads_for(override_threads, cores, local_ranks(), allowed_compute_cores());
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
