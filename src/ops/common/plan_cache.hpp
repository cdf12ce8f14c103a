// Operator plans cached by descriptor (DESIGN "Plan, then execute"). A call's descriptor is
// its validated problem without the data pointers — op, group, shapes, strides, dtypes,
// which optional tensors are present, attributes — plus the environment parameters that
// planning reads (forced algorithm, packing pin, ...). Calls with the same descriptor get
// the same plan: the first one plans (algorithm choice, GEMM plans, packed layouts,
// workspace offsets), later ones copy that plan and bind their own pointers. The argument
// checks still run on every call: they read nothing but the arguments (0.09 us for a tiny
// matmul_reduce_scatter on the AMX Xeon, against 0.36 us of planning the cache saves), and
// they are what keeps a bad call a local error on the rank that made it (issue 14).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "ops/common/quant_operands.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

// The descriptor as bytes: every value appended in a fixed order by the op's key function.
class PlanKey {
 public:
  // Starts with the op, the group (names are unique per communicator: a destroyed
  // communicator's plans can never be hit) and the planning parameters of the environment.
  PlanKey(const char* op, std::string_view group);

  PlanKey& add(int64_t v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  PlanKey& add(std::string_view s);
  PlanKey& add(const WeightLayout& w);      // n, layout, ld, a prepacked form's layout; no pointer
  PlanKey& add(const BiasArg& b);           // present, dtype
  PlanKey& add(const PackedWeightImpl& w);  // a prepared int8 x2: its plan's descriptor, threads
  PlanKey& add(const QuantScales& q);       // mode, dtypes, which scales, their granularity

  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// How often an op's plans came from its cache (tests, and COMMFUSE_VERBOSE=2 lines).
struct PlanCacheStats {
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
};
// The op's counters, created on first use; never destroyed.
PlanCacheStats& plan_cache_stats(std::string_view op);

// Plans cached by key, at most kPlanCacheCapacity per op, least recently used evicted;
// thread-safe. Data is the op's plan data (copyable; no plan holds a buffer).
inline constexpr size_t kPlanCacheCapacity = 64;

template <typename Data>
class PlanCache {
 public:
  explicit PlanCache(const char* op) : stats_(plan_cache_stats(op)) {}

  // The plan for this key: a copy of the cached one with `bind` applied (it sets the call's
  // pointers), or plan() — stored, then returned — on a miss. Errors are never cached: a
  // rejected call plans (and is rejected) again next time.
  template <typename Plan, typename Bind>
  Data get(const PlanKey& key, Plan&& plan, Bind&& bind) {
    if (std::shared_ptr<const Data> hit = find(key.bytes())) {
      stats_.hits.fetch_add(1, std::memory_order_relaxed);
      Data d = *hit;
      bind(d);
      return d;
    }
    stats_.misses.fetch_add(1, std::memory_order_relaxed);
    Data d = plan();
    insert(key.bytes(), std::make_shared<const Data>(d));
    return d;
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
  }

 private:
  using Lru = std::list<std::string>;  // most recent first
  struct Entry {
    std::shared_ptr<const Data> plan;
    typename Lru::iterator at;
  };

  std::shared_ptr<const Data> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.at);
    return it->second.plan;
  }

  void insert(const std::string& key, std::shared_ptr<const Data> plan) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) {  // another thread planned it too
      it->second.plan = std::move(plan);
      return;
    }
    if (map_.size() >= kPlanCacheCapacity) {
      map_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    map_.emplace(key, Entry{std::move(plan), lru_.begin()});
  }

  PlanCacheStats& stats_;
  std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string, Entry> map_;
};

// The plan of an op whose plan data holds the call's pointers in its problem only (the
// alltoall and quantized-reduction ops): from the op's cache, with this call's problem.
template <typename Data, typename Problem, typename Plan>
Data plan_cached(PlanCache<Data>& cache, const PlanKey& key, Problem problem, Plan&& plan) {
  return cache.get(
      key, [&] { return plan(problem); }, [&](Data& d) { d.problem = std::move(problem); });
}

}  // namespace commfuse::ops
