// CPU instruction-set features that decide which kernels can run (checked with cpuid and
// the OS's xsave state, so a feature the OS does not enable reads as absent), capped by
// COMMFUSE_MAX_CPU_ISA so that one machine can run, and test, the paths of older CPUs.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace commfuse::cpu {

struct Features {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool avx_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;
};

// ISA levels, oldest first, named as oneDNN's ONEDNN_MAX_CPU_ISA names them (lower case).
// Each level allows its own features and those of every level before it.
enum class IsaLevel {
  kSse41,           // baseline x86-64: no AVX kernels
  kAvx2,            // + avx2, fma, f16c
  kAvx2Vnni,        // + avx_vnni
  kAvx512Core,      // + avx512f, avx512bw
  kAvx512CoreVnni,  // + avx512_vnni
  kAvx512CoreBf16,  // + avx512_bf16
  kAvx512CoreFp16,  // + avx512_fp16
  kAvx512CoreAmx,   // + amx_tile, amx_bf16, amx_int8
  kAll,             // no cap
};
const char* isa_level_name(IsaLevel l);
// The level named (case-insensitive); throws InvalidArgument for an unknown name.
IsaLevel isa_level_from_name(std::string_view name);

// What the CPU and OS provide, uncapped.
const Features& detected_features();
// The cap in force: COMMFUSE_MAX_CPU_ISA, read once.
IsaLevel max_isa();
// detected_features() less everything above max_isa(): what every commfuse kernel choice
// reads.
const Features& features();
// The features a level allows (cap applied to f).
Features capped(const Features& f, IsaLevel level);
// The highest level whose features f has (e.g. kAvx2 on an AVX2-only CPU).
IsaLevel highest_level(const Features& f);

// True when the AVX2 array-loop clones may run (simd.hpp's dispatch).
bool use_avx2();
// True when the AVX-512 (F + BW) array-loop clones may run: the kAvx512Core level's features,
// present and allowed by the cap.
bool use_avx512();
// Which copy of the array loops runs: "avx512", "avx2" or "baseline x86-64".
const char* array_loops_name();
// True when the F16C conversions may run: AVX2 and F16C both present and allowed by the cap
// (a hypervisor may show AVX2 without F16C).
bool use_f16c();

// "avx2 fma f16c" style list of what is present.
std::string describe(const Features& f);
// The CPU's brand string (cpuid), e.g. "AMD EPYC 9R45"; "unknown" where there is none.
std::string model_name();
int online_cores();
// The cores this process may run on (its affinity mask: mpirun --bind-to, taskset, a
// cpuset), at most online_cores(); online_cores() where the mask cannot be read.
int allowed_cores();
// One core's L2 cache in bytes (sysfs, else sysconf; 1 MiB where the system does not say):
// the working set a kernel keeps a chunk within.
size_t l2_cache_bytes();
// A CPU list as the kernel writes one ("0-3,8") into `into`; false (into partly filled) on
// anything else: empty, a trailing comma, a reversed range, an id of CPU_SETSIZE or more.
bool parse_cpu_list(const std::string& list, std::set<int>& into);
// Sorted ids in that form, "0,2-5,7" (two in a row as "2,3"): the CPU lists the ranks
// exchange, and the launcher's lists of ranks.
std::string format_id_list(const std::vector<int>& sorted_ids);

// The last-level cache: its size in bytes (0: unknown) and how many CPUs share it (0:
// unknown).
struct CacheInfo {
  size_t bytes = 0;
  int shared_cpus = 0;
};
// The data or unified cache of `level` under a sysfs cache directory
// (<cache_dir>/index<i>/{level,type,size,shared_cpu_list}), level 0: the highest one there;
// indexes lacking a field are skipped. {0, 0} where there is none.
CacheInfo read_cache(const std::string& cache_dir, int level = 0);
// cpu0's, read once: from sysfs (what lscpu shows), else sysconf's L3, else its L2 (sharing
// unknown).
CacheInfo last_level_cache();
size_t llc_bytes();  // last_level_cache().bytes

// How many CPUs this process's cgroup cpuset allows (a container's --cpuset-cpus), from the
// cgroup paths in `proc_cgroup` (/proc/self/cgroup) under `cgroup_root` (/sys/fs/cgroup):
// v2's cpuset.cpus.effective, else v1's cpuset.effective_cpus. 0 where neither says.
int read_cgroup_cpus(const std::string& proc_cgroup, const std::string& cgroup_root);
int cgroup_cpus();  // this process's, read once

}  // namespace commfuse::cpu
