// Integer GEMM (int_matmul.hpp): path choice, the oneDNN s8 primitive and its cache, the
// AVX2 int16 kernel's dispatch (madd16_gemm.cpp) and the exact k-blocked fp32 path.
#include "kernels/cpu/int_matmul.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/simd.hpp"
#include "kernels/cpu/madd16_gemm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_plan.hpp"
#include "kernels/cpu/onednn_info.hpp"
#include "kernels/cpu/packed_b.hpp"
#include "kernels/cpu/probe_timing.hpp"
#include "kernels/cpu/small_m_int_gemm.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::kernels::cpu {

class IntMatmulPlan {
 public:
  uint64_t serial = next_plan_serial();
  IntMatmulDesc desc;
  IntMatmulPath path = IntMatmulPath::kF32Blocked;
  int threads = 1;
  int64_t k_block = 0;     // kF32Blocked: k per exact fp32 block
  dnnl::matmul primitive;  // kS8
  dnnl::memory::desc a_md, b_md, c_md, scratchpad_md;
  std::string impl;
  // desc.b_packed and the kernel's layout is not b's own: b_md is that layout, which
  // packed_b.cpp writes (own) or else pack, oneDNN's reorder of plain b (b_plain_md).
  bool packed = false;
  dnnl::memory::desc b_plain_md;
  dnnl::reorder pack;
  // The layout when packed_b.cpp can write it (faster than the reorder: 4096x4096 int8
  // took 7-9 ms through oneDNN's reorder in alltoall_quant_matmul, one thread, AMX; 120 ms
  // into the compensated layout of VNNI without AMX, AMD EPYC Zen 4). Then no reorder is
  // made: oneDNN 2.6 has none from a transposed b into the compensated layout.
  std::optional<PackedLayout> own;
};

namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

// vpmaddubsw sums two (a + 128) * b products into a saturating int16 (see the header).
constexpr int64_t kInt16Max = 32767;

std::shared_ptr<const IntMatmulPlan> create(const IntMatmulDesc& d, int threads) {
  auto plan = std::make_shared<IntMatmulPlan>();
  plan->desc = d;
  plan->threads = threads;
  plan->path = d.force_path ? *d.force_path : choose_int_matmul_path(d.a_max, d.b_max);
  // Every fp32 partial sum of a k-block is an integer of magnitude <= k_block*a_max*b_max.
  const int64_t per_term = std::max<int64_t>(1, int64_t{d.a_max} * d.b_max);
  plan->k_block = std::max<int64_t>(1, std::min<int64_t>(d.k, (int64_t{1} << 24) / per_term));
  // An x2 beyond 32-bit sizes takes the exact f32-blocked path (onednn_info.hpp). By k and n
  // only: callers prepare x2 once for the path of their largest row block and then run
  // smaller blocks (QuantRowGemm's last chunk, alltoall's GEMM chunks), which must take the
  // same path, or an s8 call would read x2 widened to fp32 as int8.
  if (plan->path == IntMatmulPath::kS8 && !d.force_path && !fits_onednn_int32_kernels(1, d.k, d.n))
    plan->path = IntMatmulPath::kF32Blocked;
  if (plan->path == IntMatmulPath::kS8 && d.m > 0) {
    ScopedComputeThreads scoped(threads);
    const dnnl::memory::desc a_md({d.m, d.k}, dt::s8, dims{d.lda, 1});
    const dnnl::memory::desc b_md({d.k, d.n}, dt::s8,
                                  d.b_transposed ? dims{1, d.ldb} : dims{d.ldb, 1});
    const dnnl::memory::desc c_md({d.m, d.n}, dt::s32, dims{d.ldc, 1});
    const dnnl::memory::desc b_any({d.k, d.n}, dt::s8, dnnl::memory::format_tag::any);
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, d.b_packed ? b_any : b_md, c_md),
                                      scratchpad_attr(), cpu_engine());
      if (d.b_packed && pd.weights_desc() == b_md)  // the kernel reads plain b: keep it
        pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), scratchpad_attr(),
                                          cpu_engine());
      if (pd.weights_desc() != b_md) {
        plan->packed = true;
        plan->own = packed_layout(pd.weights_desc());
        plan->b_plain_md = b_md;
        if (!plan->own)
          plan->pack = dnnl::reorder(
              dnnl::reorder::primitive_desc(cpu_engine(), b_md, cpu_engine(), pd.weights_desc()));
      }
      plan->primitive = dnnl::matmul(pd);
      plan->impl = pd.impl_info_str();
      plan->a_md = pd.src_desc();
      plan->b_md = pd.weights_desc();
      plan->c_md = pd.dst_desc();
      plan->scratchpad_md = pd.scratchpad_desc();
    } catch (const dnnl::error&) {
      plan->path = IntMatmulPath::kF32Blocked;  // no int8 matmul in this oneDNN build
    }
  }
  log::verbose("int matmul plan: " + describe(*plan));
  return plan;
}

struct Cache {
  std::mutex mu;
  struct Entry {
    IntMatmulDesc desc;
    int threads;
    std::shared_ptr<const IntMatmulPlan> plan;
  };
  std::vector<Entry> entries;  // small: a linear scan, oldest dropped first
};

Cache& cache() {
  static Cache* const c = new Cache;  // never destroyed (oneDNN statics, see matmul_plan.cpp)
  return *c;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

struct Scratch {
  std::unique_ptr<float[]> a, c;
  size_t a_cap = 0, c_cap = 0;
  float* get(std::unique_ptr<float[]>& p, size_t& cap, size_t count) {
    if (count > cap) {
      p = std::make_unique_for_overwrite<float[]>(count);
      cap = count;
    }
    return p.get();
  }
};

CF_SIMD_KERNEL(void, widen_s8, (const int8_t* src, float* dst, size_t count), (src, dst, count)) {
  for (size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]);
}

// c (int32, stride ldc) = or += the exact integers held by the dense fp32 block.
CF_SIMD_KERNEL(void, store_block, (const float* f, int32_t* c, size_t n, bool add),
               (f, c, n, add)) {
  if (add)
    for (size_t j = 0; j < n; ++j) c[j] += static_cast<int32_t>(f[j]);
  else
    for (size_t j = 0; j < n; ++j) c[j] = static_cast<int32_t>(f[j]);
}

void run_f32_blocked(const IntMatmulPlan& plan, const int8_t* a, const float* b, int32_t* c) {
  const IntMatmulDesc& d = plan.desc;
  thread_local Scratch s;
  float* a32 = s.get(s.a, s.a_cap, static_cast<size_t>(d.m * d.k));
  float* c32 = s.get(s.c, s.c_cap, static_cast<size_t>(d.m * d.n));
  for (int64_t r = 0; r < d.m; ++r)
    widen_s8(a + r * d.lda, a32 + r * d.k, static_cast<size_t>(d.k));
  const int64_t ldb = d.b_transposed ? d.k : d.n;  // prepare_b writes b densely
  for (int64_t k0 = 0; k0 < d.k; k0 += plan.k_block) {
    const int64_t kb = std::min(plan.k_block, d.k - k0);
    MatmulDesc md;
    md.m = d.m;
    md.k = kb;
    md.n = d.n;
    md.b_transposed = d.b_transposed;
    md.lda = d.k;
    md.ldb = ldb;
    md.ldc = d.n;
    const float* bb = d.b_transposed ? b + k0 : b + k0 * d.n;
    matmul(md, a32 + k0, bb, nullptr, c32);
    for (int64_t r = 0; r < d.m; ++r)
      store_block(c32 + r * d.n, c + r * d.ldc, static_cast<size_t>(d.n), k0 != 0);
  }
}

// The safety net under the ISA check: one small s8 GEMM whose every pair of products
// overflows int16 (a = 127 shifted to 255, b = +-127/-128), compared with the exact sums.
bool s8_kernel_exact_at_int8_extremes() {
  constexpr int64_t m = 2, k = 64, n = 2;
  std::vector<int8_t> a(m * k), b(k * n);
  for (int64_t i = 0; i < k; ++i) {
    a[i] = 127;
    a[k + i] = -128;
    b[i * n] = 127;
    b[i * n + 1] = -128;
  }
  std::vector<int32_t> c(m * n, 0);
  try {
    const dnnl::memory::desc a_md({m, k}, dt::s8, dims{k, 1});
    const dnnl::memory::desc b_md({k, n}, dt::s8, dims{n, 1});
    const dnnl::memory::desc c_md({m, n}, dt::s32, dims{n, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), cpu_engine());
    dnnl::stream stream(cpu_engine());
    dnnl::memory am(a_md, cpu_engine(), a.data()), bm(b_md, cpu_engine(), b.data()),
        cm(c_md, cpu_engine(), c.data());
    dnnl::matmul(pd).execute(stream,
                             {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  const int32_t want[] = {127 * 127 * k, 127 * -128 * k, -128 * 127 * k, -128 * -128 * k};
  return std::equal(c.begin(), c.end(), want);
}

}  // namespace

const char* int_matmul_path_name(IntMatmulPath p) {
  switch (p) {
    case IntMatmulPath::kS8:
      return "s8s8s32";
    case IntMatmulPath::kMadd16:
      return "avx2-madd16";
    case IntMatmulPath::kF32Blocked:
      return "f32-blocked";
  }
  return "?";
}

IntMatmulPath choose_int_matmul_path(int a_max, int b_max, bool int32_accumulation,
                                     IntMatmulPath exact) {
  if (int32_accumulation) return IntMatmulPath::kS8;
  // vpmaddubsw: oneDNN shifts a to u8 (a + 128 <= 255 for int8 a) and sums pairs in int16.
  const int64_t shifted_a = std::min<int64_t>(255, int64_t{a_max} + 128);
  return 2 * shifted_a * b_max <= kInt16Max ? IntMatmulPath::kS8 : exact;
}

IntMatmulPath choose_int_matmul_path(int a_max, int b_max) {
  const bool int32 = s8_gemm_accumulates_in_int32();
  // The probe only where its answer is needed (no VNNI, bounds past vpmaddubsw's).
  const IntMatmulPath s8 = choose_int_matmul_path(a_max, b_max, int32, IntMatmulPath::kF32Blocked);
  return s8 == IntMatmulPath::kS8 ? s8 : exact_int_matmul_path();
}

bool direct_int8_kernel_pays(int64_t rows) {
  return rows > 0 && rows <= kSmallIntRows && !s8_gemm_accumulates_in_int32();
}

bool always_prepares_b(IntMatmulPath path) {
  return path != IntMatmulPath::kS8;
}

IntMatmulPath exact_int_matmul_path() {
  static const IntMatmulPath path = [] {
    const std::string pin = params::get_string("COMMFUSE_INT8_GEMM");
    if (pin == "f32-blocked") return IntMatmulPath::kF32Blocked;
    if (pin == "madd16") {
      CF_CHECK_ARG(madd16_available(),
                   "COMMFUSE_INT8_GEMM=madd16 needs AVX2 (this CPU, as capped, lacks it)");
      return IntMatmulPath::kMadd16;
    }
    if (!madd16_available()) return IntMatmulPath::kF32Blocked;
    // Both exact paths on the same 64x1024x1024 int8 product with this process's threads,
    // b prepared once (as per call), best of 5 after a warm-up.
    constexpr int64_t m = 64, k = 1024, n = 1024;
    std::vector<int8_t> a(m * k), b(k * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int8_t>(i * 7 % 255 - 127);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>(i * 13 % 256 - 128);
    std::vector<int32_t> c(m * n);
    double ns[2];
    const IntMatmulPath paths[2] = {IntMatmulPath::kMadd16, IntMatmulPath::kF32Blocked};
    for (int i = 0; i < 2; ++i) {
      IntMatmulDesc d;
      d.m = m;
      d.k = d.lda = k;
      d.n = d.ldb = d.ldc = n;
      d.force_path = paths[i];
      const auto plan = plan_int_matmul(d);
      std::vector<uint8_t> prepared(prepared_b_bytes(*plan));
      prepare_b(*plan, b.data(), prepared.data());
      ns[i] = best_probe_ns([&] { int_matmul(*plan, a.data(), prepared.data(), c.data()); }, 5);
    }
    const IntMatmulPath chosen = ns[0] <= ns[1] ? paths[0] : paths[1];
    log::verbose(detail::cat("int matmul: exact int8 x int8 path without VNNI: ",
                             int_matmul_path_name(chosen), " (probe 64x1024x1024: avx2-madd16 ",
                             ns[0] / 1e3, " us, f32-blocked ", ns[1] / 1e3, " us)"));
    return chosen;
  }();
  return path;
}

bool s8_gemm_accumulates_in_int32() {
  static const bool yes = [] {
    const commfuse::cpu::Features& f = commfuse::cpu::features();  // capped
    if (!(f.avx512_vnni || f.avx_vnni || f.amx_int8)) return false;
    if (!onednn_int8_accumulates_in_int32()) return false;  // ONEDNN_MAX_CPU_ISA below VNNI
    const bool exact = s8_kernel_exact_at_int8_extremes();
    if (!exact)
      CF_LOG(kWarn, "int matmul: oneDNN's s8 kernel saturated on a VNNI CPU (",
             onednn_effective_isa(), "); int8 x int8 uses the exact f32-blocked path");
    return exact;
  }();
  return yes;
}
std::shared_ptr<const IntMatmulPlan> plan_int_matmul(const IntMatmulDesc& d) {
  CF_CHECK_ARG(d.m >= 0 && d.k >= 1 && d.n >= 1, "int_matmul: m, k, n are ", d.m, ", ", d.k, ", ",
               d.n, " (need m >= 0, k >= 1, n >= 1)");
  CF_CHECK_ARG(d.lda >= d.k, "int_matmul: lda is ", d.lda, " but must be >= k = ", d.k);
  CF_CHECK_ARG(d.ldb >= (d.b_transposed ? d.k : d.n), "int_matmul: ldb is ", d.ldb, " too small");
  CF_CHECK_ARG(d.ldc >= d.n, "int_matmul: ldc is ", d.ldc, " but must be >= n = ", d.n);
  CF_CHECK_ARG(d.a_max >= 1 && d.a_max <= 128 && d.b_max >= 1 && d.b_max <= 128,
               "int_matmul: value bounds ", d.a_max, ", ", d.b_max, " must be in 1..128");
  CF_CHECK_ARG(d.force_path != IntMatmulPath::kS8 ||
                   choose_int_matmul_path(d.a_max, d.b_max) == IntMatmulPath::kS8,
               "int_matmul: force_path s8s8s32 is not exact for bounds ", d.a_max, ", ", d.b_max,
               " on this CPU (its s8 kernel sums pairs in saturating int16)");
  CF_CHECK_ARG(d.force_path != IntMatmulPath::kMadd16 || madd16_available(),
               "int_matmul: force_path avx2-madd16 needs AVX2 (this CPU, as capped, lacks it)");
  // The path before the lock: choosing it may run exact_int_matmul_path's probe once,
  // which plans its own (forced) GEMMs here.
  if (!d.force_path) (void)choose_int_matmul_path(d.a_max, d.b_max);
  const int threads = compute_threads();
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& e : c.entries)
    if (e.threads == threads && e.desc == d) return e.plan;
  auto plan = create(d, threads);
  if (c.entries.size() >= 32) c.entries.erase(c.entries.begin());
  c.entries.push_back({d, threads, plan});
  return plan;
}

IntMatmulPath path_of(const IntMatmulPlan& plan) {
  return plan.path;
}

std::string describe(const IntMatmulPlan& p) {
  const IntMatmulDesc& d = p.desc;
  return detail::cat(
      "m=", d.m, " k=", d.k, " n=", d.n, d.b_transposed ? " b(T)" : "", " |a|<=", d.a_max,
      " |b|<=", d.b_max, " -> ", int_matmul_path_name(p.path),
      p.path == IntMatmulPath::kS8       ? " (" + p.impl + ")"
      : p.path == IntMatmulPath::kMadd16 ? std::string(" (b as int16 pairs, vpmaddwd)")
                                         : detail::cat(" (k blocks of ", p.k_block, ")"),
      p.packed ? (p.own ? ", b read packed" : ", b read in oneDNN's reordered layout") : "",
      d.force_path ? " (forced)" : "", ", oneDNN ISA ", onednn_effective_isa(), ", ", p.threads,
      " threads");
}

size_t prepared_b_bytes(const IntMatmulPlan& plan) {
  if (plan.path == IntMatmulPath::kS8) return plan.packed ? plan.b_md.get_size() : 0;
  if (plan.path == IntMatmulPath::kMadd16) return madd16_packed_b_bytes(plan.desc.k, plan.desc.n);
  return static_cast<size_t>(plan.desc.k * plan.desc.n) * sizeof(float);
}

bool reads_packed_b(const IntMatmulPlan& plan) {
  return plan.path == IntMatmulPath::kS8 && plan.packed;
}

bool int8_packing_pays(const IntMatmulPlan& packed, bool several_calls, int64_t rows) {
  if (!reads_packed_b(packed)) return false;
  // oneDNN's reorder (a layout packed_b does not write): as for one call of a row (only
  // COMMFUSE_PACK_X2=always packs), however many calls.
  const bool reorder = !packed.own;
  return packing_pays(reorder ? 1 : several_calls ? 0 : rows);
}

bool same_prepared_b(const IntMatmulPlan& a, const IntMatmulPlan& b) {
  if (a.path != b.path) return false;
  if (a.path != IntMatmulPath::kS8)  // k x n floats in b's own layout, or madd16's panels
    return a.desc.k == b.desc.k && a.desc.n == b.desc.n &&
           a.desc.b_transposed == b.desc.b_transposed;
  return a.packed == b.packed && (!a.packed || a.b_md == b.b_md);
}

void prepare_b(const IntMatmulPlan& plan, const int8_t* b, void* prepared) {
  if (plan.path == IntMatmulPath::kS8) {
    if (!plan.packed) return;
    if (plan.own) {
      const IntMatmulDesc& d = plan.desc;
      pack_b_s8(*plan.own, b, d.k, d.n, d.ldb, d.b_transposed, prepared);
      return;
    }
    ScopedComputeThreads scoped(plan.threads);
    try {
      dnnl::memory src(plan.b_plain_md, cpu_engine(), const_cast<int8_t*>(b));
      dnnl::memory dst(plan.b_md, cpu_engine(), prepared);
      plan.pack.execute(thread_stream(), src, dst);
      thread_stream().wait();
    } catch (const dnnl::error& e) {
      detail::throw_status(Status::kRuntimeError,
                           detail::cat("int_matmul: oneDNN's reorder of b failed (", describe(plan),
                                       "): ", e.what()));
    }
    return;
  }
  const IntMatmulDesc& d = plan.desc;
  if (plan.path == IntMatmulPath::kMadd16) {
    madd16_pack_b(b, d.k, d.n, d.ldb, d.b_transposed, prepared);
    return;
  }
  const int64_t rows = d.b_transposed ? d.n : d.k, cols = d.b_transposed ? d.k : d.n;
  auto* out = static_cast<float*>(prepared);
  for (int64_t r = 0; r < rows; ++r)
    widen_s8(b + r * d.ldb, out + r * cols, static_cast<size_t>(cols));
}

void int_matmul(const IntMatmulPlan& plan, const int8_t* a, const void* b_prepared, int32_t* c) {
  const IntMatmulDesc& d = plan.desc;
  if (d.m == 0) return;
  if (plan.path == IntMatmulPath::kF32Blocked) {
    run_f32_blocked(plan, a, static_cast<const float*>(b_prepared), c);
    return;
  }
  if (plan.path == IntMatmulPath::kMadd16) {
    madd16_gemm(a, d.m, d.k, d.n, d.lda, b_prepared, c, d.ldc, plan.threads);
    return;
  }
  const auto& args = thread_args({&plan, plan.serial}, {plan.a_md, a}, {plan.b_md, b_prepared},
                                 {plan.c_md, c}, nullptr, nullptr, plan.scratchpad_md);
  ScopedComputeThreads scoped(plan.threads);
  try {
    plan.primitive.execute(thread_stream(), args);
    thread_stream().wait();
  } catch (const dnnl::error& e) {
    detail::throw_status(Status::kRuntimeError, detail::cat("int_matmul: oneDNN failed (",
                                                            describe(plan), "): ", e.what()));
  }
}

}  // namespace commfuse::kernels::cpu
