#include "core/cpu_features.hpp"

#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace commfuse::cpu {
namespace {

Features detect() {
  Features f;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = (xcr0 & 0xE6) == 0xE6;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  f.fma = f.fma && os_avx;
  f.f16c = f.f16c && os_avx;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = os_avx && ((b >> 5) & 1);
    f.avx512f = os_avx512 && ((b >> 16) & 1);
    f.avx512bw = os_avx512 && ((b >> 30) & 1);
    f.avx512_vnni = os_avx512 && ((c >> 11) & 1);
    f.avx512_fp16 = os_avx512 && ((d >> 23) & 1);
    f.amx_bf16 = os_amx && ((d >> 22) & 1);
    f.amx_tile = os_amx && ((d >> 24) & 1);
    f.amx_int8 = os_amx && ((d >> 25) & 1);
    __cpuid_count(7, 1, a, b, c, d);
    f.avx_vnni = os_avx && ((a >> 4) & 1);
    f.avx512_bf16 = os_avx512 && ((a >> 5) & 1);
  }
#endif
  return f;
}

}  // namespace

const Features& features() {
  static const Features f = detect();
  return f;
}

std::string describe(const Features& f) {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx_vnni, "avx_vnni");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_fp16, "avx512_fp16");
  add(f.amx_tile, "amx_tile");
  add(f.amx_bf16, "amx_bf16");
  add(f.amx_int8, "amx_int8");
  return s.empty() ? "baseline x86-64" : s;
}

int online_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace commfuse::cpu
