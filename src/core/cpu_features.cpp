#include "core/cpu_features.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace commfuse::cpu {
namespace {

// cpu0's caches, as the kernel lists them (what lscpu reads).
constexpr const char* kCpu0Caches = "/sys/devices/system/cpu/cpu0/cache";

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

constexpr std::array<const char*, 9> kLevelNames{"sse41",
                                                 "avx2",
                                                 "avx2_vnni",
                                                 "avx512_core",
                                                 "avx512_core_vnni",
                                                 "avx512_core_bf16",
                                                 "avx512_core_fp16",
                                                 "avx512_core_amx",
                                                 "all"};

bool at_least(IsaLevel have, IsaLevel want) {
  return static_cast<int>(have) >= static_cast<int>(want);
}

}  // namespace

const char* isa_level_name(IsaLevel l) {
  return kLevelNames[static_cast<size_t>(l)];
}

IsaLevel isa_level_from_name(std::string_view name) {
  std::string lower(name);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (size_t i = 0; i < kLevelNames.size(); ++i)
    if (lower == kLevelNames[i]) return static_cast<IsaLevel>(i);
  detail::throw_status(Status::kParamInvalid,
                       detail::cat("CPU ISA level '", name, "' is not one of sse41|avx2|avx2_vnni|",
                                   "avx512_core|avx512_core_vnni|avx512_core_bf16|",
                                   "avx512_core_fp16|avx512_core_amx|all"));
}

Features capped(const Features& f, IsaLevel level) {
  Features c;
  if (at_least(level, IsaLevel::kAvx2)) {
    c.avx2 = f.avx2;
    c.fma = f.fma;
    c.f16c = f.f16c;
  }
  if (at_least(level, IsaLevel::kAvx2Vnni)) c.avx_vnni = f.avx_vnni;
  if (at_least(level, IsaLevel::kAvx512Core)) {
    c.avx512f = f.avx512f;
    c.avx512bw = f.avx512bw;
  }
  if (at_least(level, IsaLevel::kAvx512CoreVnni)) c.avx512_vnni = f.avx512_vnni;
  if (at_least(level, IsaLevel::kAvx512CoreBf16)) c.avx512_bf16 = f.avx512_bf16;
  if (at_least(level, IsaLevel::kAvx512CoreFp16)) c.avx512_fp16 = f.avx512_fp16;
  if (at_least(level, IsaLevel::kAvx512CoreAmx)) {
    c.amx_tile = f.amx_tile;
    c.amx_bf16 = f.amx_bf16;
    c.amx_int8 = f.amx_int8;
  }
  return c;
}

IsaLevel highest_level(const Features& f) {
  // Each level needs its own features and all of the levels below it.
  if (!(f.avx2 && f.fma && f.f16c)) return IsaLevel::kSse41;
  if (!(f.avx512f && f.avx512bw)) return f.avx_vnni ? IsaLevel::kAvx2Vnni : IsaLevel::kAvx2;
  if (!f.avx512_vnni) return IsaLevel::kAvx512Core;
  if (!f.avx512_bf16) return IsaLevel::kAvx512CoreVnni;
  if (f.amx_tile && f.amx_bf16 && f.amx_int8) return IsaLevel::kAvx512CoreAmx;
  return f.avx512_fp16 ? IsaLevel::kAvx512CoreFp16 : IsaLevel::kAvx512CoreBf16;
}

const Features& detected_features() {
  static const Features f = detect();
  return f;
}

IsaLevel max_isa() {
  // Read from kernel dispatch, where nothing may throw: an invalid value is logged once
  // (and shown as INVALID by `commfuse info`) and leaves the CPU uncapped, as an invalid
  // COMMFUSE_LOG keeps "warn".
  static const IsaLevel level = [] {
    try {
      return isa_level_from_name(params::get_string("COMMFUSE_MAX_CPU_ISA"));
    } catch (const Error& e) {
      CF_LOG(kWarn, e.what(), "; using all");
      return IsaLevel::kAll;
    }
  }();
  return level;
}

const Features& features() {
  static const Features f = capped(detected_features(), max_isa());
  return f;
}

bool use_avx2() {
  static const bool on = features().avx2;
  return on;
}

bool use_avx512() {
  static const bool on = features().avx2 && features().avx512f && features().avx512bw;
  return on;
}

const char* array_loops_name() {
  return use_avx512() ? "avx512" : use_avx2() ? "avx2" : "baseline x86-64";
}

bool use_f16c() {
  static const bool on = features().avx2 && features().f16c;
  return on;
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

std::string model_name() {
  std::string name;
#if defined(__x86_64__)
  unsigned regs[4];
  // gcc's <cpuid.h> returns unsigned, clang's int: compare as unsigned under both.
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000, nullptr)) >= 0x80000004u)
    for (unsigned leaf = 0x80000002; leaf <= 0x80000004; ++leaf) {
      __cpuid(leaf, regs[0], regs[1], regs[2], regs[3]);
      name.append(reinterpret_cast<const char*>(regs), sizeof(regs));
    }
#endif
  name.resize(std::strlen(name.c_str()));  // the brand string is NUL-padded
  const size_t first = name.find_first_not_of(' '), last = name.find_last_not_of(' ');
  return first == std::string::npos ? "unknown" : name.substr(first, last - first + 1);
}

int online_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return online_cores();
  const int n = CPU_COUNT(&set);  // a mask beyond 1024 CPUs reads as an error above
  return n > 0 ? std::min(n, online_cores()) : online_cores();
}

size_t l2_cache_bytes() {
  // sysfs first, as for the last level (sysconf misread that on an AMD EPYC Zen 4 VM).
  static const size_t bytes = [] {
    if (const CacheInfo c = read_cache(kCpu0Caches, 2); c.bytes > 0) return c.bytes;
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? static_cast<size_t>(l2) : size_t{1} << 20;
  }();
  return bytes;
}

bool parse_cpu_list(const std::string& list, std::set<int>& into) {
  if (list.empty()) return false;
  size_t i = 0;
  auto number = [&](int& v) {
    if (i >= list.size() || list[i] < '0' || list[i] > '9') return false;
    v = 0;
    while (i < list.size() && list[i] >= '0' && list[i] <= '9') {
      v = v * 10 + (list[i++] - '0');
      if (v >= CPU_SETSIZE) return false;
    }
    return true;
  };
  while (i < list.size()) {
    int lo = 0, hi = 0;
    if (!number(lo)) return false;
    hi = lo;
    if (i < list.size() && list[i] == '-') {
      ++i;
      if (!number(hi) || hi < lo) return false;
    }
    for (int c = lo; c <= hi; ++c) into.insert(c);
    if (i == list.size()) break;
    if (list[i++] != ',' || i == list.size()) return false;  // "0,": a range must follow
  }
  return true;
}

std::string format_id_list(const std::vector<int>& sorted_ids) {
  std::string out;
  for (size_t i = 0; i < sorted_ids.size();) {
    size_t j = i;
    while (j + 1 < sorted_ids.size() && sorted_ids[j + 1] == sorted_ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(sorted_ids[i]);
    if (j > i) {
      out += j == i + 1 ? ',' : '-';
      out += std::to_string(sorted_ids[j]);
    }
    i = j + 1;
  }
  return out;
}

CacheInfo read_cache(const std::string& cache_dir, int want_level) {
  CacheInfo best;
  int best_level = 0;
  for (int i = 0; i < 64; ++i) {
    const std::string dir = cache_dir + "/index" + std::to_string(i) + "/";
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) break;  // the indexes are numbered from 0
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size"),
        shared_file(dir + "shared_cpu_list");
    int level = 0;
    std::string type, size, shared;
    // An index lacking a field (some ARM systems give no size) is skipped, not the end.
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) continue;
    if (type == "Instruction" || (want_level > 0 ? level != want_level : level < best_level))
      continue;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(size.c_str(), &end, 10);
    const size_t scale = *end == 'K'   ? size_t{1} << 10
                         : *end == 'M' ? size_t{1} << 20
                         : *end == 'G' ? size_t{1} << 30
                                       : 1;
    if (v == 0 || end == size.c_str() || v > (size_t{1} << 40) / scale) continue;
    best.bytes = static_cast<size_t>(v) * scale;
    std::set<int> cpus;
    best.shared_cpus =
        shared_file >> shared && parse_cpu_list(shared, cpus) ? static_cast<int>(cpus.size()) : 0;
    best_level = level;
  }
  return best;
}

CacheInfo last_level_cache() {
  // sysfs first: glibc's sysconf can report the whole package's L3 rather than the one these
  // cores share (an AMD EPYC Zen 4 VM: 320 MiB, where sysfs and lscpu say 32 MiB).
  static const CacheInfo info = [] {
    if (const CacheInfo c = read_cache(kCpu0Caches); c.bytes > 0) return c;
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return CacheInfo{llc > 0 ? static_cast<size_t>(llc) : size_t{0}, 0};
  }();
  return info;
}

size_t llc_bytes() {
  return last_level_cache().bytes;
}

int read_cgroup_cpus(const std::string& proc_cgroup, const std::string& cgroup_root) {
  std::ifstream in(proc_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    // "<id>:<controllers>:<path>"; cgroup v2's single line is "0::<path>".
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string base, file;
    if (controllers.empty()) {
      base = cgroup_root;
      file = "cpuset.cpus.effective";
    } else if (("," + controllers + ",").find(",cpuset,") != std::string::npos) {
      base = cgroup_root + "/cpuset";
      file = "cpuset.effective_cpus";
    } else {
      continue;
    }
    // v2 writes the file only where the cpuset controller is enabled: the nearest ancestor
    // that has one holds the set.
    while (true) {
      std::ifstream f(base + path + "/" + file);
      std::string list;
      std::set<int> cpus;
      if (f >> list && parse_cpu_list(list, cpus)) return static_cast<int>(cpus.size());
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.find_last_of('/'));
    }
  }
  return 0;
}

int cgroup_cpus() {
  static const int n = read_cgroup_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
  return n;
}

}  // namespace commfuse::cpu
