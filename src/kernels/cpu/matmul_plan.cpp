// Matmul planning: validation, the choice of oneDNN primitive and the plan cache.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "kernels/cpu/f32_gemm_model.hpp"
#include "kernels/cpu/half_gemm_model.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_plan.hpp"
#include "kernels/cpu/onednn_info.hpp"
#include "kernels/cpu/openblas.hpp"
#include "kernels/cpu/small_m_gemm.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::kernels::cpu {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

bool is_float_input(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// dtype_name throws for a value outside the enum; error messages must not.
std::string name_of(DType t) {
  try {
    return std::string(dtype_name(t));
  } catch (const Error&) {
    return detail::cat("dtype(", static_cast<int>(t), ")");
  }
}

dt to_dnnl(DType t) {
  switch (t) {
    case DType::kFloat32:
      return dt::f32;
    case DType::kFloat16:
      return dt::f16;
    case DType::kBFloat16:
      return dt::bf16;
    default:
      break;
  }
  CF_ASSERT(false);
  return dt::undef;
}

// Operand layouts handed to oneDNN. The caller's strides when oneDNN reads the caller's
// buffers, dense ones when it reads our fp32 scratch.
struct Layout {
  dt in;
  dt out;
  dt bias;
  bool dense_inputs;
  bool dense_c;
};

dnnl::matmul::primitive_desc make_pd(const MatmulDesc& d, const Layout& l, bool packed_b = false) {
  const int64_t lda = l.dense_inputs ? d.k : d.lda;
  const int64_t ldb = l.dense_inputs ? (d.b_transposed ? d.k : d.n) : d.ldb;
  const int64_t ldc = l.dense_c ? d.n : d.ldc;
  const dnnl::memory::desc a_md({d.m, d.k}, l.in, dims{lda, 1});
  // A transposed b is the (n, k) buffer read column-wise: strides (1, ldb).
  // Packed: whatever blocked layout the kernel wants (packed_b.hpp checks it is one we pack).
  const dnnl::memory::desc b_md =
      packed_b ? dnnl::memory::desc({d.k, d.n}, l.in, dnnl::memory::format_tag::any)
               : dnnl::memory::desc({d.k, d.n}, l.in, d.b_transposed ? dims{1, ldb} : dims{ldb, 1});
  const dnnl::memory::desc c_md({d.m, d.n}, l.out, dims{ldc, 1});
  const dnnl::memory::desc bias_md =
      d.has_bias ? dnnl::memory::desc({1, d.n}, l.bias, dims{d.n, 1}) : dnnl::memory::desc();
  dnnl::primitive_attr attr = scratchpad_attr();
  if (d.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);  // dst = dst + (a @ b + bias), summed in fp32
    attr.set_post_ops(ops);
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), attr,
                                      cpu_engine());
}

void set_primitive(const dnnl::matmul::primitive_desc& pd, MatmulPlan& plan) {
  plan.primitive = dnnl::matmul(pd);
  plan.impl = pd.impl_info_str();
  plan.a_md = pd.src_desc();
  plan.b_md = pd.weights_desc();
  plan.c_md = pd.dst_desc();
  plan.bias_md = pd.bias_desc();  // zero desc when there is no bias
  plan.scratchpad_md = pd.scratchpad_desc();
}

bool is_reference_impl(const dnnl::matmul::primitive_desc& pd) {
  // oneDNN's "ref:any" loops are orders of magnitude slower than widening to fp32.
  return std::string_view(pd.impl_info_str()).starts_with("ref");
}

// The same primitive reading b packed, when oneDNN picks a layout packed_b.hpp packs (pd is
// then replaced and the layout returned); otherwise pd stays as it is.
std::optional<PackedLayout> try_packed(const MatmulDesc& d, const Layout& l,
                                       dnnl::matmul::primitive_desc& pd) {
  try {
    auto packed_pd = make_pd(d, l, true);
    if (is_reference_impl(packed_pd)) return std::nullopt;
    auto layout = packed_layout(packed_pd.weights_desc());
    if (layout) pd = packed_pd;
    return layout;
  } catch (const dnnl::error&) {
    return std::nullopt;  // no kernel for the packed form: plain b
  }
}

// fp16/bf16 straight into oneDNN, when this oneDNN and CPU have a real kernel for it.
// Every desc reaching here is within 32-bit sizes already: create_plan rejects larger
// weights and cuts larger a and c into row chunks.
bool try_native(const MatmulDesc& d, MatmulPlan& plan) {
  Layout l{to_dnnl(d.a_dtype), to_dnnl(d.c_dtype), to_dnnl(d.bias_dtype), false, false};
  std::vector<bool> bias_f32_options{false};
  // Some kernels take only a fp32 bias; converting n values per call is cheap.
  if (d.has_bias && d.bias_dtype != DType::kFloat32) bias_f32_options.push_back(true);
  for (const bool bias_f32 : bias_f32_options) {
    if (bias_f32) l.bias = dt::f32;
    try {
      auto pd = make_pd(d, l);
      if (is_reference_impl(pd)) return false;
      std::optional<PackedLayout> layout;
      if (d.b_packed && !d.b_transposed) layout = try_packed(d, l, pd);
      set_primitive(pd, plan);
      plan.packed = layout;  // only once the primitive reading it exists
      plan.bias_to_f32 = bias_f32;
      return true;
    } catch (const dnnl::error&) {
      // unimplemented for this CPU: try the next option
    }
  }
  return false;
}

void plan_widened(const MatmulDesc& d, MatmulPlan& plan) {
  const bool narrow_c = d.c_dtype != DType::kFloat32;
  const Layout l{dt::f32, dt::f32, dt::f32, d.a_dtype != DType::kFloat32, narrow_c};
  try {
    set_primitive(make_pd(d, l), plan);
  } catch (const dnnl::error& e) {
    // Past 32-bit sizes oneDNN may have no kernel for the shape (fuzzing found k·n of 2^34
    // and more refused): a shape this CPU path does not support, not a failure of the run.
    const bool beyond = !fits_onednn_int32_kernels(d.m, d.k, d.n);
    detail::throw_status(beyond ? Status::kParamInvalid : Status::kRuntimeError,
                         detail::cat("matmul: ", beyond ? "not supported: " : "",
                                     "oneDNN could not create a float32 matmul for ",
                                     describe(plan), ": ", e.what()));
  }
  plan.widened = d.a_dtype != DType::kFloat32;
  plan.bias_to_f32 = d.has_bias && d.bias_dtype != DType::kFloat32;
}

// The direct few-rows kernel (small_m_gemm.hpp): no oneDNN primitive.
void plan_small_m(const MatmulDesc& d, MatmulPlan& plan) {
  plan.small_m = true;
  plan.impl = "commfuse:small_m";
  plan.bias_to_f32 = d.has_bias && d.bias_dtype != DType::kFloat32;
}

// fp32 on OpenBLAS: forced, or the machine model's choice (measured before the lock).
bool use_openblas(const MatmulDesc& d, int threads) {
  // cblas_sgemm takes int dimensions and strides; a legal view can pass a larger stride
  // (x2 of one row with any row stride): oneDNN's are 64-bit, even where OpenBLAS is pinned
  // (it was an internal error at execute).
  for (const int64_t v : {d.m, d.n, d.k, d.lda, d.ldb, d.ldc})
    if (v > INT32_MAX) return false;
  switch (d.provider) {
    case GemmProvider::kOneDnn:
      return false;
    case GemmProvider::kOpenBlas:
      if (!openblas_available())
        detail::throw_status(
            Status::kParamInvalid,
            detail::cat("matmul: not supported: provider OpenBLAS (", openblas_unavailable(), ")"));
      return true;
    case GemmProvider::kAuto:
      break;
  }
  return openblas_pays(d.m, d.k, d.n, threads);
}

std::shared_ptr<const MatmulPlan> create_plan(const MatmulDesc& d, int threads) {
  auto plan = std::make_shared<MatmulPlan>();
  plan->desc = d;
  plan->threads = threads;
  if (d.m == 0) return plan;
  // k, n <= kMaxWeightElements first, so that k * n cannot overflow.
  if (d.k > kMaxWeightElements || d.n > kMaxWeightElements || d.k * d.n > kMaxWeightElements)
    detail::throw_status(
        Status::kParamInvalid,
        detail::cat("matmul: not supported: x2 of k = ", d.k, " by n = ", d.n,
                    " elements (the CPU GEMM takes at most ", kMaxWeightElements, ")"));
  const int64_t chunk = std::max<int64_t>(1, kMaxCallElements / std::max(d.k, d.n));
  if (d.m > chunk) {
    MatmulDesc sub = d;
    sub.m = chunk;
    sub.b_packed = false;  // the tail's plan might want another layout: chunks read b plain
    plan->chunk = create_plan(sub, threads);
    plan->chunk_rows = chunk;
    plan->widened = plan->chunk->widened;
    plan->small_m = plan->chunk->small_m;
    plan->openblas = plan->chunk->openblas;
    plan->impl = plan->chunk->impl;
    plan->widen_reason = plan->chunk->widen_reason;
    plan->bias_to_f32 = plan->chunk->bias_to_f32;
    return plan;
  }
  // Some oneDNN kernels size their work split from the thread count at creation.
  ScopedComputeThreads scoped(threads);
  // The model is consulted for kAuto only (plan_matmul measured it before taking the lock).
  // Few rows: the direct kernel where the model measured it faster than the native one
  // (first: widening would take the same kernel for these rows anyway).
  const bool direct = d.a_dtype != DType::kFloat32 && d.half_path == HalfPath::kAuto &&
                      small_m_gemm_applies(d) && direct_pays(d.a_dtype, d.m);
  const bool widen_pays = d.a_dtype != DType::kFloat32 && d.half_path == HalfPath::kAuto &&
                          widening_pays(d.a_dtype, d.m, d.k, d.n, d.c_dtype != DType::kFloat32);
  const bool native_wanted =
      d.half_path == HalfPath::kNative || (d.half_path == HalfPath::kAuto && !widen_pays);
  if (direct) {
    plan->widen_reason = "direct kernel faster here";
    plan_small_m(d, *plan);
  } else if (d.a_dtype != DType::kFloat32 && !(native_wanted && try_native(d, *plan))) {
    plan->widen_reason = widen_pays                          ? "fp32 faster here"
                         : d.half_path == HalfPath::kWidened ? "forced"
                                                             : "no native kernel";
    // Few rows without a native kernel: direct or widened, by this machine's rates (a
    // forced path, as the few-rows probe's, keeps the direct kernel).
    const bool few = small_m_gemm_applies(d);
    const bool direct_few =
        few && (d.half_path != HalfPath::kAuto ||
                direct_beats_widening(d.a_dtype, d.m, d.k, d.n, d.c_dtype != DType::kFloat32));
    if (few && !direct_few)
      plan->widen_reason = "no native kernel; fp32 faster than the direct kernel here";
    if (direct_few)
      plan_small_m(d, *plan);
    else
      plan_widened(d, *plan);
  } else if (d.a_dtype == DType::kFloat32 && use_openblas(d, threads)) {
    plan->openblas = true;
    plan->impl = "openblas:sgemm";
  } else if (d.a_dtype == DType::kFloat32) {
    plan_widened(d, *plan);
  }
  log::verbose("matmul plan: " + describe(*plan));
  return plan;
}

struct CacheEntry {
  MatmulDesc desc;
  int threads;
  std::shared_ptr<const MatmulPlan> plan;
  uint64_t last_use;
};

struct PlanCache {
  std::mutex mu;
  std::vector<CacheEntry> entries;  // <= kMatmulPlanCacheCapacity: a linear scan is cheap
  uint64_t clock = 0;
};

PlanCache& plan_cache() {
  // Never destroyed: destroying primitives after oneDNN's own statics at exit is unsafe.
  static PlanCache* const cache = new PlanCache;
  return *cache;
}

}  // namespace

const dnnl::engine& cpu_engine() {
  static const dnnl::engine* const engine = [] {
    apply_onednn_isa_cap();  // before oneDNN's first kernel fixes its ISA
    bound_onednn_primitive_cache();
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *engine;
}

dnnl::primitive_attr scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void* scratchpad_buffer(size_t bytes) {
  // Page-aligned, as oneDNN's own scratchpad: its brgemm kernels copy blocks of b there and
  // load AMX tiles and AVX-512 vectors from them. From new[] (16-byte aligned) the s8 GEMM
  // of 2048x4096x4096 on AMX ran 72 ms against oneDNN's own scratchpad's 53 ms.
  constexpr size_t kAlign = 4096;
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<void, Free> data;
    size_t capacity = 0;
  };
  thread_local Buffer buffer;
  if (bytes > buffer.capacity) {
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    buffer.data.reset();  // the old one first: peak memory is the new size only
    buffer.capacity = 0;  // so that a failed allocation leaves no stale capacity behind
    buffer.data.reset(std::aligned_alloc(kAlign, rounded));
    if (!buffer.data) throw std::bad_alloc();
    buffer.capacity = rounded;
  }
  return buffer.data.get();
}

const std::unordered_map<int, dnnl::memory>& thread_args(PlanKey key, Operand a, Operand b,
                                                         Operand c,
                                                         const dnnl::memory::desc* bias_md,
                                                         const void* bias,
                                                         const dnnl::memory::desc& scratchpad_md) {
  struct Entry {
    PlanKey key{nullptr, 0};
    std::unordered_map<int, dnnl::memory> args;
  };
  constexpr size_t kEntries = 8;
  thread_local std::array<Entry, kEntries> cache;
  thread_local size_t next = 0;
  Entry* hit = nullptr;
  for (Entry& e : cache)
    if (e.key.plan == key.plan && e.key.serial == key.serial) hit = &e;
  if (hit == nullptr) {  // round robin: the oldest entry goes
    auto memory = [](const dnnl::memory::desc& md) {
      return dnnl::memory(md, cpu_engine(), nullptr);
    };
    // Built aside and keyed last: if oneDNN throws here, the entry still holds its old
    // plan's key and arguments, never this key with another plan's arguments.
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory(a.md)},
                                               {DNNL_ARG_WEIGHTS, memory(b.md)},
                                               {DNNL_ARG_DST, memory(c.md)}};
    if (bias_md != nullptr) args.emplace(DNNL_ARG_BIAS, memory(*bias_md));
    if (scratchpad_md.get_size() != 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad_md));
    hit = &cache[next++ % kEntries];
    hit->args = std::move(args);
    hit->key = key;
  }
  auto& args = hit->args;
  args.at(DNNL_ARG_SRC).set_data_handle(const_cast<void*>(a.data));
  args.at(DNNL_ARG_WEIGHTS).set_data_handle(const_cast<void*>(b.data));
  args.at(DNNL_ARG_DST).set_data_handle(const_cast<void*>(c.data));
  if (bias_md != nullptr) args.at(DNNL_ARG_BIAS).set_data_handle(const_cast<void*>(bias));
  if (const size_t bytes = scratchpad_md.get_size(); bytes != 0)
    args.at(DNNL_ARG_SCRATCHPAD).set_data_handle(scratchpad_buffer(bytes));
  return args;
}

uint64_t next_plan_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

MatmulDesc dense_matmul_desc(int64_t m, int64_t k, int64_t n, DType dtype, bool b_transposed) {
  MatmulDesc d;
  d.m = m;
  d.k = k;
  d.n = n;
  d.a_dtype = d.b_dtype = d.c_dtype = d.bias_dtype = dtype;
  d.b_transposed = b_transposed;
  d.lda = k;
  d.ldb = b_transposed ? k : n;
  d.ldc = n;
  return d;
}

void validate(const MatmulDesc& d) {
  CF_CHECK_ARG(d.m >= 0, "matmul: m is ", d.m, " but must be >= 0");
  CF_CHECK_ARG(d.k >= 1, "matmul: k is ", d.k, " but must be >= 1");
  CF_CHECK_ARG(d.n >= 1, "matmul: n is ", d.n, " but must be >= 1");
  CF_CHECK_ARG(is_float_input(d.a_dtype), "matmul: a dtype ", name_of(d.a_dtype),
               " is not supported (float32, float16, bfloat16)");
  CF_CHECK_ARG(d.b_dtype == d.a_dtype, "matmul: b dtype ", name_of(d.b_dtype),
               " must equal a dtype ", name_of(d.a_dtype));
  CF_CHECK_ARG(d.c_dtype == DType::kFloat32 || d.c_dtype == d.a_dtype, "matmul: c dtype ",
               name_of(d.c_dtype), " must be float32 or a dtype ", name_of(d.a_dtype));
  CF_CHECK_ARG(!d.has_bias || d.bias_dtype == DType::kFloat32 || d.bias_dtype == d.a_dtype,
               "matmul: bias dtype ", name_of(d.bias_dtype), " must be float32 or a dtype ",
               name_of(d.a_dtype));
  CF_CHECK_ARG(!d.accumulate || d.c_dtype == DType::kFloat32,
               "matmul: accumulate needs a float32 c, but c dtype is ", name_of(d.c_dtype));
  CF_CHECK_ARG(d.lda >= d.k, "matmul: lda is ", d.lda, " but must be >= k = ", d.k);
  const int64_t min_ldb = d.b_transposed ? d.k : d.n;
  CF_CHECK_ARG(d.ldb >= min_ldb, "matmul: ldb is ", d.ldb,
               " but must be >= ", d.b_transposed ? "k = " : "n = ", min_ldb,
               d.b_transposed ? " (b transposed)" : "");
  CF_CHECK_ARG(d.ldc >= d.n, "matmul: ldc is ", d.ldc, " but must be >= n = ", d.n);
}

std::shared_ptr<const MatmulPlan> plan_matmul(const MatmulDesc& desc) {
  validate(desc);
  // Measured outside the lock: the models plan their probes through here.
  if (desc.a_dtype != DType::kFloat32 && desc.half_path == HalfPath::kAuto && desc.m > 0) {
    half_gemm_model(desc.a_dtype);
    few_rows_model(desc.a_dtype);
  }
  // One read of the thread count: the model measured above must be the one create_plan
  // asks about under the lock (a count changed in between by another thread's communicator
  // set-up would start the measurement there, which plans its probes through this lock).
  const int threads = compute_threads();
  if (desc.a_dtype == DType::kFloat32 && desc.provider == GemmProvider::kAuto && desc.m > 0)
    openblas_pays(desc.m, desc.k, desc.n, threads);
  PlanCache& cache = plan_cache();
  // Creation happens under the lock: it is rare, and two threads asking for the same new
  // plan then JIT it once.
  std::lock_guard<std::mutex> lock(cache.mu);
  ++cache.clock;
  for (CacheEntry& e : cache.entries) {
    if (e.threads == threads && e.desc == desc) {
      e.last_use = cache.clock;
      return e.plan;
    }
  }
  auto plan = create_plan(desc, threads);
  if (cache.entries.size() >= kMatmulPlanCacheCapacity) {
    auto oldest = cache.entries.begin();
    for (auto it = cache.entries.begin(); it != cache.entries.end(); ++it)
      if (it->last_use < oldest->last_use) oldest = it;
    cache.entries.erase(oldest);
  }
  cache.entries.push_back({desc, threads, plan, cache.clock});
  return plan;
}

std::string describe(const MatmulPlan& p) {
  const MatmulDesc& d = p.desc;
  std::string s =
      detail::cat("m=", d.m, " k=", d.k, " n=", d.n, " a=", name_of(d.a_dtype),
                  " b=", name_of(d.b_dtype), d.b_transposed ? "(T)" : "", " c=", name_of(d.c_dtype),
                  " lda=", d.lda, " ldb=", d.ldb, " ldc=", d.ldc);
  if (d.has_bias) s += detail::cat(" bias=", name_of(d.bias_dtype));
  if (d.accumulate) s += " accumulate";
  s += detail::cat(" -> ", p.impl.empty() ? "none" : p.impl, " (oneDNN ISA ",
                   onednn_effective_isa(), ")");
  if (p.widened)
    s += detail::cat(", ", name_of(d.a_dtype), " widened to float32 (", p.widen_reason, ")");
  if (p.small_m)
    s += detail::cat(", ", name_of(d.a_dtype), " read in place (", p.widen_reason,
                     "; m <= ", kSmallMRows, ")");
  if (p.packed)
    s += detail::cat(", b packed once (blocks of ", p.packed->k_block * p.packed->pair, "x",
                     p.packed->n_block, ")");
  if (p.bias_to_f32) s += ", bias widened to float32";
  if (p.chunk) s += detail::cat(", in chunks of ", p.chunk_rows, " rows");
  return s + detail::cat(", ", p.threads, " threads");
}

const PackedLayout* packed_b_layout(const MatmulPlan& plan) {
  return plan.packed ? &*plan.packed : nullptr;
}

std::shared_ptr<const MatmulPlan> plan_matmul_over(MatmulDesc d, const PackedLayout* layout,
                                                   bool* reads_packed) {
  *reads_packed = false;
  if (layout != nullptr) {
    d.b_packed = true;
    auto plan = plan_matmul(d);
    if (plan->packed && *plan->packed == *layout) {
      *reads_packed = true;
      return plan;
    }
  }
  d.b_packed = false;
  return plan_matmul(d);
}

bool widens_inputs(const MatmulPlan& plan) {
  return plan.widened;
}

size_t matmul_plan_cache_size() {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.entries.size();
}

void clear_matmul_plan_cache() {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  cache.entries.clear();
}

}  // namespace commfuse::kernels::cpu
