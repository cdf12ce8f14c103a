// The ISA cap (COMMFUSE_MAX_CPU_ISA): level names, what each level allows, and that the
// features every kernel choice reads are the CPU's, less what the cap in force removes.
// Run natively and again capped (tests/CMakeLists.txt), so both answers are checked.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "comm/host_cores.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/onednn_info.hpp"

namespace cpu = commfuse::cpu;
using cpu::IsaLevel;

namespace {

cpu::Features all_features() {
  cpu::Features f;
  f.avx2 = f.fma = f.f16c = f.avx_vnni = true;
  f.avx512f = f.avx512bw = f.avx512_vnni = f.avx512_bf16 = f.avx512_fp16 = true;
  f.amx_tile = f.amx_bf16 = f.amx_int8 = true;
  return f;
}

bool subset(const cpu::Features& a, const cpu::Features& b) {
  const bool pa[] = {a.avx2,     a.fma,         a.f16c,        a.avx512f,
                     a.avx512bw, a.avx512_vnni, a.avx512_bf16, a.avx512_fp16,
                     a.avx_vnni, a.amx_tile,    a.amx_bf16,    a.amx_int8};
  const bool pb[] = {b.avx2,     b.fma,         b.f16c,        b.avx512f,
                     b.avx512bw, b.avx512_vnni, b.avx512_bf16, b.avx512_fp16,
                     b.avx_vnni, b.amx_tile,    b.amx_bf16,    b.amx_int8};
  for (size_t i = 0; i < std::size(pa); ++i)
    if (pa[i] && !pb[i]) return false;
  return true;
}

}  // namespace

TEST(CpuIsa, LevelNamesRoundTripInAnyCase) {
  for (int i = 0; i <= static_cast<int>(IsaLevel::kAll); ++i) {
    const auto l = static_cast<IsaLevel>(i);
    EXPECT_EQ(cpu::isa_level_from_name(cpu::isa_level_name(l)), l);
  }
  EXPECT_EQ(cpu::isa_level_from_name("AVX2"), IsaLevel::kAvx2);
  EXPECT_EQ(cpu::isa_level_from_name("Avx512_Core_AMX"), IsaLevel::kAvx512CoreAmx);
  try {
    cpu::isa_level_from_name("avx3");
    ADD_FAILURE() << "avx3 accepted";
  } catch (const commfuse::Error& e) {
    EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid);
    EXPECT_NE(std::string(e.what()).find("'avx3'"), std::string::npos) << e.what();
  }
}

TEST(CpuIsa, EachLevelAllowsItsFeaturesAndThoseBelow) {
  const cpu::Features all = all_features();
  const cpu::Features avx2 = cpu::capped(all, IsaLevel::kAvx2);
  EXPECT_TRUE(avx2.avx2 && avx2.fma && avx2.f16c);
  EXPECT_FALSE(avx2.avx_vnni || avx2.avx512f || avx2.avx512_vnni || avx2.amx_int8);
  EXPECT_EQ(cpu::describe(cpu::capped(all, IsaLevel::kSse41)), "baseline x86-64");
  const cpu::Features vnni = cpu::capped(all, IsaLevel::kAvx512CoreVnni);
  EXPECT_TRUE(vnni.avx512f && vnni.avx512bw && vnni.avx512_vnni && vnni.avx_vnni);
  EXPECT_FALSE(vnni.avx512_bf16 || vnni.avx512_fp16 || vnni.amx_tile);
  EXPECT_EQ(cpu::describe(cpu::capped(all, IsaLevel::kAll)), cpu::describe(all));
  // Levels are cumulative, and the highest level of a capped full set is the cap.
  for (int i = 0; i <= static_cast<int>(IsaLevel::kAll); ++i) {
    const auto l = static_cast<IsaLevel>(i);
    if (i > 0) {
      EXPECT_TRUE(subset(cpu::capped(all, static_cast<IsaLevel>(i - 1)), cpu::capped(all, l)));
    }
    if (l != IsaLevel::kAll) {
      EXPECT_EQ(cpu::highest_level(cpu::capped(all, l)), l);
    }
  }
  // A cap never adds what the CPU lacks.
  cpu::Features avx2_cpu;
  avx2_cpu.avx2 = avx2_cpu.fma = avx2_cpu.f16c = true;
  EXPECT_EQ(cpu::describe(cpu::capped(avx2_cpu, IsaLevel::kAll)), "avx2 fma f16c");
  EXPECT_EQ(cpu::highest_level(avx2_cpu), IsaLevel::kAvx2);
}

TEST(CpuIsa, FeaturesAreTheDetectedOnesUnderTheCapInForce) {
  const char* env = std::getenv("COMMFUSE_MAX_CPU_ISA");
  const IsaLevel want = env != nullptr ? cpu::isa_level_from_name(env) : IsaLevel::kAll;
  EXPECT_EQ(cpu::max_isa(), want);
  EXPECT_EQ(cpu::describe(cpu::features()),
            cpu::describe(cpu::capped(cpu::detected_features(), want)));
  EXPECT_TRUE(subset(cpu::features(), cpu::detected_features()));
  EXPECT_EQ(cpu::use_avx2(), cpu::features().avx2);
  EXPECT_EQ(cpu::use_avx512(),
            cpu::features().avx2 && cpu::features().avx512f && cpu::features().avx512bw);
  if (want <= IsaLevel::kAvx2Vnni) {
    EXPECT_STREQ(cpu::array_loops_name(), cpu::use_avx2() ? "avx2" : "baseline x86-64");
    EXPECT_FALSE(cpu::features().avx512f);
    EXPECT_FALSE(cpu::features().amx_int8);
  }
}

TEST(CpuIsa, OneDnnIsCappedToMatchUnlessTheUserCappedIt) {
  const std::string isa = commfuse::kernels::cpu::onednn_effective_isa();
  // The user's ONEDNN_MAX_CPU_ISA wins over commfuse's cap (onednn_info.hpp).
  const char* user = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (user == nullptr || *user == '\0') user = std::getenv("DNNL_MAX_CPU_ISA");
  if (user != nullptr && *user == '\0') user = nullptr;
  const IsaLevel cap = user != nullptr ? cpu::isa_level_from_name(user) : cpu::max_isa();
  const bool has_avx2 = cpu::detected_features().avx2 && cpu::detected_features().fma;
  if (cap == IsaLevel::kSse41) {
    EXPECT_EQ(isa, "sse41");
  }
  if (cap == IsaLevel::kAvx2 && has_avx2) {
    EXPECT_EQ(isa, "avx2");
  }
  if (cap == IsaLevel::kAll && cpu::detected_features().avx512f) {
    EXPECT_NE(isa.find("avx512"), std::string::npos) << isa;
  }
  EXPECT_FALSE(isa.empty());
}

// The last-level cache is the highest-level data or unified cache a sysfs cache directory
// lists (what lscpu shows; glibc's sysconf reported an AMD EPYC Zen 4 VM's 32 MiB L3 as 320
// MiB), with the CPUs that share it: read from fake directory trees here.
namespace {
void write_index(const std::filesystem::path& dir, int i, const char* level, const char* type,
                 const char* size, const char* shared) {
  const auto d = dir / ("index" + std::to_string(i));
  std::filesystem::create_directories(d);
  auto put = [&](const char* name, const char* v) {
    if (v != nullptr) std::ofstream(d / name) << v << "\n";
  };
  put("level", level);
  put("type", type);
  put("size", size);
  put("shared_cpu_list", shared);
}
}  // namespace

TEST(CpuCaches, SysfsGivesTheLastLevelAndTheL2) {
  using commfuse::cpu::read_cache;
  const auto root = std::filesystem::temp_directory_path() /
                    ("commfuse-cache-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  // Zen 4 style: L1d, L1i, L2 per core, one 32 MiB L3 over CPUs 0-1.
  const auto zen = root / "zen";
  write_index(zen, 0, "1", "Data", "32K", "0");
  write_index(zen, 1, "1", "Instruction", "32K", "0");
  write_index(zen, 2, "2", "Unified", "1024K", "0");
  write_index(zen, 3, "3", "Unified", "32768K", "0-1");
  auto c = read_cache(zen.string());
  EXPECT_EQ(c.bytes, size_t{32} << 20);
  EXPECT_EQ(c.shared_cpus, 2);
  // A level asked for by number (l2_cache_bytes): the L2, not the larger L3 after it.
  c = read_cache(zen.string(), 2);
  EXPECT_EQ(c.bytes, size_t{1} << 20);
  EXPECT_EQ(c.shared_cpus, 1);
  EXPECT_EQ(read_cache(zen.string(), 4).bytes, 0u);
  // A larger instruction cache does not count; M and G suffixes; a sharing list with gaps.
  const auto big = root / "big";
  write_index(big, 0, "1", "Data", "48K", "0,64");
  write_index(big, 1, "2", "Unified", "2M", "0,64");
  write_index(big, 2, "3", "Unified", "1G", "0-31,64-95");
  write_index(big, 3, "4", "Instruction", "4G", "0-127");
  c = read_cache(big.string());
  EXPECT_EQ(c.bytes, size_t{1} << 30);
  EXPECT_EQ(c.shared_cpus, 64);
  // An index lacking its size (some ARM systems) is skipped, not the end of the list; a
  // missing or malformed sharing list is unknown (0).
  const auto arm = root / "arm";
  write_index(arm, 0, "1", "Data", "64K", "0");
  write_index(arm, 1, "2", "Unified", nullptr, "0-3");
  write_index(arm, 2, "3", "Unified", "8192K", nullptr);
  c = read_cache(arm.string());
  EXPECT_EQ(c.bytes, size_t{8} << 20);
  EXPECT_EQ(c.shared_cpus, 0);
  write_index(arm, 2, "3", "Unified", "8192K", "0-");
  EXPECT_EQ(read_cache(arm.string()).shared_cpus, 0);
  // Nothing there, or only instruction caches: unknown.
  EXPECT_EQ(read_cache((root / "none").string()).bytes, 0u);
  const auto instr = root / "instr";
  write_index(instr, 0, "1", "Instruction", "32K", "0");
  EXPECT_EQ(read_cache(instr.string()).bytes, 0u);
  std::filesystem::remove_all(root);

  // This machine's: sysfs's where it has one, never smaller than an L2 sysfs also knows.
  const auto mine = commfuse::cpu::last_level_cache();
  const auto from_sysfs = read_cache("/sys/devices/system/cpu/cpu0/cache");
  if (from_sysfs.bytes > 0) {
    EXPECT_EQ(mine.bytes, from_sysfs.bytes);
    EXPECT_EQ(mine.shared_cpus, from_sysfs.shared_cpus);
  }
  EXPECT_EQ(commfuse::cpu::llc_bytes(), mine.bytes);
  if (const auto l2 = read_cache("/sys/devices/system/cpu/cpu0/cache", 2); l2.bytes > 0) {
    EXPECT_EQ(commfuse::cpu::l2_cache_bytes(), l2.bytes);
  }
}

// A container's cpuset (docker --cpuset-cpus) from the cgroup files, v2 and v1, on fake
// trees: what the ranks' affinity is compared with before it warns (comm/host_cores.cpp).
TEST(CpuCaches, CgroupCpusetIsReadFromV2OrV1) {
  using commfuse::cpu::read_cgroup_cpus;
  const auto root = std::filesystem::temp_directory_path() /
                    ("commfuse-cgroup-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  auto put = [](const std::filesystem::path& f, const char* text) {
    std::filesystem::create_directories(f.parent_path());
    std::ofstream(f) << text;
  };
  // v2: the container's group has cpuset.cpus.effective.
  put(root / "v2/proc", "0::/docker/abc\n");
  put(root / "v2/fs/docker/abc/cpuset.cpus.effective", "2-3,8\n");
  EXPECT_EQ(read_cgroup_cpus((root / "v2/proc").string(), (root / "v2/fs").string()), 3);
  // v2 without the controller at the leaf: the nearest ancestor's set.
  put(root / "v2up/proc", "0::/a/b\n");
  put(root / "v2up/fs/a/cpuset.cpus.effective", "0-5\n");
  EXPECT_EQ(read_cgroup_cpus((root / "v2up/proc").string(), (root / "v2up/fs").string()), 6);
  // v1 (this project's VMs): the cpuset hierarchy's effective_cpus; other controllers ignored.
  put(root / "v1/proc", "4:memory:/x\n3:cpuset:/\n1:cpu,cpuacct:/\n0::/\n");
  put(root / "v1/fs/cpuset/cpuset.effective_cpus", "0-1\n");
  EXPECT_EQ(read_cgroup_cpus((root / "v1/proc").string(), (root / "v1/fs").string()), 2);
  // Nothing readable, or a malformed list: unknown.
  EXPECT_EQ(read_cgroup_cpus((root / "none").string(), (root / "none").string()), 0);
  put(root / "bad/proc", "0::/\n");
  put(root / "bad/fs/cpuset.cpus.effective", "0-\n");
  EXPECT_EQ(read_cgroup_cpus((root / "bad/proc").string(), (root / "bad/fs").string()), 0);
  std::filesystem::remove_all(root);
  EXPECT_GE(commfuse::cpu::cgroup_cpus(), 0);

  // The warning's rule: short only against what the container allows.
  using commfuse::comm::affinity_leaves_short;
  using commfuse::comm::cpus_available;
  EXPECT_EQ(cpus_available(64, 2), 2);   // docker --cpuset-cpus=0-1 on a 64-CPU host
  EXPECT_EQ(cpus_available(64, 0), 64);  // no cpuset known
  EXPECT_EQ(cpus_available(2, 8), 2);
  EXPECT_FALSE(affinity_leaves_short(4, 2, cpus_available(64, 2)));  // the container's 2 CPUs
  EXPECT_TRUE(affinity_leaves_short(4, 2, cpus_available(64, 0)));
  EXPECT_TRUE(affinity_leaves_short(2, 1, 2));  // OMP_PROC_BIND put both ranks on CPU 0
  EXPECT_TRUE(affinity_leaves_short(4, 1, 2));  // and with more ranks than CPUs
  EXPECT_FALSE(affinity_leaves_short(2, 2, 2));
  EXPECT_FALSE(affinity_leaves_short(1, 1, 2));
}

// The CPU lists the kernel writes (and the ranks exchange): ranges and single ids.
TEST(CpuCaches, CpuListsParseAsTheKernelWritesThem) {
  std::set<int> s;
  EXPECT_TRUE(commfuse::cpu::parse_cpu_list("0-3,8,10-11", s));
  EXPECT_EQ(s, (std::set<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(commfuse::cpu::format_id_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10,11");
  std::set<int> back;
  EXPECT_TRUE(
      commfuse::cpu::parse_cpu_list(commfuse::cpu::format_id_list({0, 1, 2, 3, 8, 10, 11}), back));
  EXPECT_EQ(back, s);
  EXPECT_EQ(commfuse::cpu::format_id_list({}), "");
  for (const char* bad : {"", "-", "1-0", "0,", ",0", "0-", "a", "0 1", "0,,1", "0-1-2", "99999"}) {
    std::set<int> t;
    EXPECT_FALSE(commfuse::cpu::parse_cpu_list(bad, t)) << '"' << bad << '"';
  }
}
