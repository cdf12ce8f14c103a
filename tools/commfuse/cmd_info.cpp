// `commfuse info`: everything a bug report needs about this build and machine.
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <string>

#include "cli_args.hpp"
#include "comm/comm_impl.hpp"
#include "comm/mpi/mpi_info.hpp"
#include "comm/nccl/nccl_gather.hpp"
#include "comm/shm/cma.hpp"
#include "comm/shm/shm_transport.hpp"
#include "commands.hpp"
#include "core/build_info.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/f32_gemm_model.hpp"
#include "kernels/cpu/half_gemm_model.hpp"
#include "kernels/cpu/int_matmul.hpp"
#include "kernels/cpu/onednn_info.hpp"
#include "kernels/cpu/openblas.hpp"
#include "kernels/cpu/threads.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::cli {

namespace {
constexpr const char* kUsage =
    "usage: commfuse info\n"
    "\n"
    "Prints what a bug report needs: version, build type, compiler, backends, MPI, CUDA,\n"
    "oneDNN, CPU cores and features, and every COMMFUSE_* parameter with its current value,\n"
    "default and meaning.\n";

// Where CMA would be used (cma.hpp's model, with this process's measurements); a bad
// COMMFUSE_COPY_LOOP leaves `copy` unchosen, which info says and goes on.
std::string cma_line() {
  try {
    return detail::cat(
        "CMA (process_vm_readv) available; used where it saves ",
        comm::shm::cma_crossover_bytes(false, comm::shm::thread_sync_us()),
        " bytes of copying per rank (where ranks share cores, all_to_all's crossover is timed "
        "by each group at set-up); measured here: system call ",
        comm::shm::cma_syscall_us(), " us, core-to-core synchronization ",
        comm::shm::thread_sync_us(), " us (a communicator measures its ranks'), copy ",
        kernels::cpu::copy_bytes_per_us() / 1e3, " GB/s");
  } catch (const Error& e) {
    return detail::cat("CMA (process_vm_readv) available; crossover unknown: ", e.what());
  }
}

// Set bits as ranges ("1-15, 20").
std::string bit_ranges(uint64_t bits) {
  std::string ranges;
  for (int d = 0; d < 64; ++d) {
    if ((bits >> d & 1) == 0) continue;
    int e = d;
    while (e + 1 < 64 && (bits >> (e + 1) & 1) != 0) ++e;
    ranges +=
        detail::cat(ranges.empty() ? "" : ", ", d, e > d ? detail::cat("-", e) : std::string());
    d = e;
  }
  return ranges;
}

// Where a copy is slow (kernels/cpu/copy.hpp), as distances of destination past source.
std::string slow_where(const kernels::cpu::SlowCopyDistances& slow) {
  std::string where;
  if (slow.near != 0) where = detail::cat(bit_ranges(slow.near), " bytes");
  if (slow.far != 0)
    where += detail::cat(where.empty() ? "" : "; ", "64 x k + (", bit_ranges(slow.far),
                         ") bytes (measured at 2048 + 0..63)");
  return where + " past the source modulo 4 KiB";
}

// The bulk copy's choice: memcpy, and the distances of destination past source where the
// vector loop replaces it; with CMA, where its reads go through a buffer. A bad
// COMMFUSE_COPY_LOOP says so here, and info goes on (its parameter table names it too).
std::string bulk_copy_line(bool cma) {
  try {
    const char* nt = "non-temporal vector stores from the last-level cache share up";
    const std::string pin = params::get_string("COMMFUSE_COPY_LOOP");
    if (pin != "auto")
      return detail::cat(pin == "all"
                             ? "the vector loop at every distance of destination past source"
                             : "glibc memcpy at every distance",
                         cma ? (pin == "all" ? ", CMA reads of 4 KiB or more through a buffer"
                                             : ", CMA reads straight into the destination")
                             : "",
                         " (pinned: COMMFUSE_COPY_LOOP=", pin, "), ", nt);
    const kernels::cpu::SlowCopyDistances& slow = kernels::cpu::memcpy_slow_distances();
    std::string line =
        slow.near == 0 && slow.far == 0
            ? "glibc memcpy (measured at 128 distances of destination past source: none over 2x "
              "slower than the vector loop)"
            : detail::cat("glibc memcpy, but the vector loop where the destination is ",
                          slow_where(slow), " (memcpy measured over 2x slower there)");
    if (cma) {
      const kernels::cpu::SlowCopyDistances& read = comm::shm::cma_slow_distances();
      line += read.near == 0 && read.far == 0
                  ? "; CMA reads straight into the destination (none over 2x slower at any of "
                    "the 128)"
                  : detail::cat(
                        "; CMA reads of 4 KiB or more through a buffer where the "
                        "destination is ",
                        slow_where(read), " (process_vm_readv over 2x slower there)");
    }
    return detail::cat(line, ", ", nt);
  } catch (const Error& e) {
    return detail::cat("none chosen: ", e.what());
  }
}

// The exact int8 x int8 path without VNNI, or why none could be chosen (a pin this CPU
// cannot run): info still prints the rest.
std::string exact_int8_gemm_line() {
  try {
    return kernels::cpu::exact_int_matmul_path() == kernels::cpu::IntMatmulPath::kMadd16
               ? "avx2-madd16 (vpmaddwd, int32 sums)"
               : "exact f32 blocks";
  } catch (const Error& e) {
    return std::string("none: ") + e.what();
  }
}
}  // namespace

int cmd_info(int argc, char** argv) {
  if (const auto rc = no_options(argc, argv, kUsage)) return *rc;
  const auto& f = cpu::features();
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  std::printf("commfuse %s\n", version());
  std::printf("  build type        %s%s\n", build::build_type().c_str(),
              build::sanitized() ? " (ASan+UBSan)" : "");
  std::printf("  compiler          %s\n", build::compiler().c_str());
  std::printf("  backends          cpu (oneDNN)%s%s\n", build::have_mpi() ? ", mpi" : "",
              build::have_cuda() ? ", cuda" : "");
  std::printf("  MPI built         %s (%s)\n", yn(build::have_mpi()),
              comm::mpi_library_version().c_str());
  {
    const auto& cu = kernels::cuda::runtime_info();
    if (cu.built) {
      std::printf("  CUDA built        yes (%s; runtime %s, linked statically)\n",
                  cu.toolkit.c_str(), kernels::cuda::version_string(cu.runtime_version).c_str());
      std::printf("  CUDA driver       %s\n",
                  cu.driver_version == 0
                      ? "none"
                      : kernels::cuda::version_string(cu.driver_version).c_str());
      for (size_t d = 0; d < cu.devices.size(); ++d) {
        const auto& dev = cu.devices[d];
        std::printf("  CUDA device %zu     %s, sm_%d%d, %.1f GiB, %d SMs\n", d, dev.name.c_str(),
                    dev.major, dev.minor, static_cast<double>(dev.memory_bytes) / (1u << 30),
                    dev.multiprocessors);
      }
      if (!cu.unavailable.empty())
        std::printf("  CUDA devices      none usable: %s\n", cu.unavailable.c_str());
      std::printf("  NCCL              %s\n", comm::nccl::nccl_describe().c_str());
    } else {
      std::printf("  CUDA built        no (%s)\n", cu.unavailable.c_str());
    }
  }
  std::printf("  oneDNN            %s\n", kernels::cpu::onednn_version().c_str());
  const int allowed = kernels::cpu::allowed_compute_cores();
  std::printf("  CPU               %s, %d cores online%s\n", cpu::model_name().c_str(),
              cpu::online_cores(),
              allowed < cpu::online_cores()
                  ? detail::cat(" (", allowed, " in this process's affinity mask)").c_str()
                  : "");
  std::printf(
      "  CPU features      AVX2 %s, AVX-512 %s, AVX512-BF16 %s, VNNI %s (AVX512-VNNI %s, "
      "AVX-VNNI %s)\n",
      yn(f.avx2), yn(f.avx512f), yn(f.avx512_bf16), yn(f.avx512_vnni || f.avx_vnni),
      yn(f.avx512_vnni), yn(f.avx_vnni));
  std::printf("  CPU feature list  %s\n", cpu::describe(f).c_str());
  const cpu::CacheInfo llc = cpu::last_level_cache();
  std::printf(
      "  CPU caches        L2 %zu KiB per core, last level %s\n", cpu::l2_cache_bytes() >> 10,
      llc.bytes == 0 ? "unknown"
      : llc.shared_cpus > 0
          ? detail::cat(llc.bytes >> 10, " KiB shared by ", llc.shared_cpus, " CPUs").c_str()
          : detail::cat(llc.bytes >> 10, " KiB").c_str());
  const cpu::IsaLevel cap = cpu::max_isa();
  std::printf(
      "  CPU ISA           %s (detected %s%s)\n", cpu::isa_level_name(cpu::highest_level(f)),
      cpu::isa_level_name(cpu::highest_level(cpu::detected_features())),
      cap == cpu::IsaLevel::kAll
          ? ""
          : (std::string(", capped by COMMFUSE_MAX_CPU_ISA=") + cpu::isa_level_name(cap)).c_str());
  std::printf("  oneDNN ISA        %s\n", kernels::cpu::onednn_effective_isa().c_str());
  std::printf("  array loops       %s (the copy of the loops that have one: core/simd.hpp)\n",
              cpu::array_loops_name());
  if (kernels::cpu::s8_gemm_accumulates_in_int32())
    std::printf("  int8 GEMM         oneDNN s8 (int32 accumulation: VNNI/AMX) for int8 and int4\n");
  else  // the exact path for int8 x int8, chosen by a probe or pinned (int_matmul.hpp)
    std::printf("  int8 GEMM         oneDNN s8 for int4 ranges; for int8 (no VNNI/AMX): %s\n",
                exact_int8_gemm_line().c_str());
  for (const DType t : {DType::kBFloat16, DType::kFloat16})
    std::printf("  16-bit GEMM       %s\n", kernels::cpu::describe_half_gemm_model(t).c_str());
  std::printf("  fp32 GEMM         %s\n", kernels::cpu::describe_f32_gemm_model().c_str());
  if (kernels::cpu::openblas_available())
    std::printf("  OpenBLAS          %s\n", kernels::cpu::openblas_config().c_str());
  // What a communicator on this host would find: a child reading this process (the group
  // itself probes between its ranks at set-up and reports it with COMMFUSE_VERBOSE=1).
  const std::string why = comm::shm::cma_self_check();
  std::printf("  shm single copy   %s\n",
              why.empty() ? cma_line().c_str()
                          : ("CMA unavailable (" + why + "): the shared slots carry all").c_str());
  std::printf("  bulk copy         %s\n", bulk_copy_line(why.empty()).c_str());
  std::printf("\nparameters (environment, value, default, description):\n");
  for (const auto& p : params::all()) {
    std::string value;
    try {
      value = params::get_string(p.env);
      comm::check_param(p.env);  // what communicator creation refuses
    } catch (const Error& e) {
      value = std::string("INVALID: ") + e.what();
    }
    std::string def(p.default_value);
    if (!p.choices.empty()) def += " [" + std::string(p.choices) + "]";
    if (const std::string range = params::range_text(p); !range.empty()) def += " " + range;
    std::printf("  %-22s %-10s default %-24s %s\n", std::string(p.env).c_str(),
                value.empty() ? "\"\"" : value.c_str(), def.empty() ? "\"\"" : def.c_str(),
                std::string(p.description).c_str());
  }
  return 0;
}

}  // namespace commfuse::cli
