#include "ops/common/plan_cache.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "kernels/cpu/threads.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {
namespace {

// The parameters planning reads at plan time rather than once per process (core/params):
// their raw values, so that a caller who changes one between calls gets a new plan
// (tools/commfuse/algo_scope.hpp forces algorithms that way).
constexpr const char* kPlanningParams[] = {"COMMFUSE_ALGO", "COMMFUSE_PACK_X2",
                                           "COMMFUSE_HALF_GEMM", "COMMFUSE_ALLTOALL_GEMM_ROWS"};

}  // namespace

PlanCacheStats& plan_cache_stats(std::string_view op) {
  static std::mutex mu;
  static auto* const stats = new std::map<std::string, PlanCacheStats, std::less<>>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = stats->find(op);
  if (it == stats->end()) it = stats->try_emplace(std::string(op)).first;
  return it->second;
}

PlanKey::PlanKey(const char* op, std::string_view group) {
  bytes_.reserve(256);
  add(op);
  add(group);
  // GEMM plans are made for a thread count, which changes with the ranks sharing a host.
  add(kernels::cpu::compute_threads());
  for (const char* name : kPlanningParams) {
    const char* v = std::getenv(name);
    add(v != nullptr ? std::string_view(v) : std::string_view("\x01unset", 6));
  }
}

PlanKey& PlanKey::add(std::string_view s) {
  add(static_cast<int64_t>(s.size()));
  bytes_.append(s);
  return *this;
}

PlanKey& PlanKey::add(const WeightLayout& w) {
  add(w.n).add(w.transposed ? 1 : 0).add(w.ld);
  // A prepacked x2's layout decides which GEMM plans read it (its buffer is bound per call).
  if (w.prepacked == nullptr) return add(0);
  if (w.prepacked->int_plan) return add(2).add(*w.prepacked);
  const kernels::cpu::PackedLayout& l = *w.prepacked->layout;
  return add(1)
      .add(l.k_block)
      .add(l.n_block)
      .add(l.pair)
      .add(l.k_stride)
      .add(l.n_stride)
      .add(l.padded_k)
      .add(l.padded_n);
}

PlanKey& PlanKey::add(const PackedWeightImpl& w) {
  // An int8 x2's prepared layout follows from its plan's descriptor and the thread count it
  // was made for (plan_int_matmul is deterministic in both), whatever this call's count.
  const kernels::cpu::IntMatmulDesc& d = w.int_desc;
  add(w.int_threads);
  return add(d.m)
      .add(d.k)
      .add(d.n)
      .add(d.lda)
      .add(d.ldb)
      .add(d.b_transposed ? 1 : 0)
      .add(d.a_max)
      .add(d.b_max)
      .add(d.b_packed ? 1 : 0);
}

PlanKey& PlanKey::add(const BiasArg& b) {
  return add(b.data != nullptr ? 1 : 0).add(static_cast<int64_t>(b.dtype));
}

PlanKey& PlanKey::add(const QuantScales& q) {
  return add(static_cast<int64_t>(q.mode))
      .add(static_cast<int64_t>(q.a_dtype))
      .add(static_cast<int64_t>(q.b_dtype))
      .add(q.x1_scale != nullptr ? 1 : 0)
      .add(q.x1_per_token ? 1 : 0)
      .add(q.x2_scale != nullptr ? 1 : 0)
      .add(q.x2_per_channel ? 1 : 0)
      .add(q.bias_int != nullptr ? 1 : 0);
}

}  // namespace commfuse::ops
