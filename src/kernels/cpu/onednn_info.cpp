#include "kernels/cpu/onednn_info.hpp"

#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <mutex>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace commfuse::kernels::cpu {
namespace {

dnnl_cpu_isa_t onednn_level(commfuse::cpu::IsaLevel l) {
  using commfuse::cpu::IsaLevel;
  switch (l) {
    case IsaLevel::kSse41:
      return dnnl_cpu_isa_sse41;
    case IsaLevel::kAvx2:
      return dnnl_cpu_isa_avx2;
    case IsaLevel::kAvx2Vnni:
      return dnnl_cpu_isa_avx2_vnni;
    case IsaLevel::kAvx512Core:
      return dnnl_cpu_isa_avx512_core;
    case IsaLevel::kAvx512CoreVnni:
      return dnnl_cpu_isa_avx512_core_vnni;
    case IsaLevel::kAvx512CoreBf16:
    case IsaLevel::kAvx512CoreFp16:  // oneDNN 2.x has no fp16 level: the one below it
      return dnnl_cpu_isa_avx512_core_bf16;
    case IsaLevel::kAvx512CoreAmx:
      return dnnl_cpu_isa_avx512_core_amx;
    case IsaLevel::kAll:
      break;
  }
  return dnnl_cpu_isa_all;
}

const char* onednn_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_all:
      return "all";
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return nullptr;  // a level of a newer oneDNN
  }
}

}  // namespace

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                        : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                             : "threadpool/other";
  return detail::cat(v->major, ".", v->minor, ".", v->patch, " (cpu runtime ", runtime, ", hash ",
                     v->hash, ")");
}

void apply_onednn_isa_cap() {
  static std::once_flag once;
  std::call_once(once, [] {
    const commfuse::cpu::IsaLevel cap = commfuse::cpu::max_isa();
    if (cap == commfuse::cpu::IsaLevel::kAll) return;
    // The user's own oneDNN setting wins: it may be set to test oneDNN alone. (Empty counts
    // as unset, as oneDNN reads it.)
    for (const char* env : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
      if (const char* v = std::getenv(env); v != nullptr && *v != '\0') return;
    const dnnl_status_t st = dnnl_set_max_cpu_isa(onednn_level(cap));
    if (st != dnnl_success)  // oneDNN already fixed its ISA (a kernel ran before the cap)
      CF_LOG(kWarn, "COMMFUSE_MAX_CPU_ISA=", commfuse::cpu::isa_level_name(cap),
             ": oneDNN refused the cap (status ", static_cast<int>(st), ")");
  });
}

void bound_onednn_primitive_cache() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* env : {"ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY"})
      if (const char* v = std::getenv(env); v != nullptr && *v != '\0') return;
    const dnnl_status_t st = dnnl_set_primitive_cache_capacity(kOneDnnPrimitiveCacheCapacity);
    if (st != dnnl_success)
      CF_LOG(kWarn, "oneDNN refused a primitive cache capacity of ", kOneDnnPrimitiveCacheCapacity,
             " (status ", static_cast<int>(st), ")");
  });
}

bool fits_onednn_int32_kernels(int64_t m, int64_t k, int64_t n) {
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  // Each dimension first, so the products below cannot overflow int64.
  if (m > kMax || k > kMax || n > kMax) return false;
  return m * k <= kMax && k * n <= kMax && m * n <= kMax;
}

std::string onednn_effective_isa() {
  apply_onednn_isa_cap();
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const char* name = onednn_isa_name(isa);
  return name != nullptr ? std::string(name) : detail::cat("0x", std::hex, static_cast<int>(isa));
}

bool onednn_int8_accumulates_in_int32() {
  apply_onednn_isa_cap();
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx2_vnni || isa == dnnl_cpu_isa_avx512_core_vnni ||
         isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

}  // namespace commfuse::kernels::cpu
