// `commfuse demo`: the project's main job. Checks the number formats, then launches 8 local
// ranks (demo-worker) that run the operators on the seed example of npu_all_gather_base_mm
// and larger cases, check each against a float64 reference and time it.
#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "commands.hpp"
#include "demo_quant.hpp"
#include "demo_timing.hpp"
#include "kernels/cpu/matmul.hpp"
#include "launcher.hpp"
#include "roundoff.hpp"

namespace commfuse::cli {
namespace {

constexpr int kDemoRanks = 8;

constexpr const char* kUsage =
    "usage: commfuse demo\n"
    "\n"
    "The main job: the number-format self-check (commfuse selfcheck), then 8 local ranks\n"
    "(commfuse launch) run the operators on the seed example of npu_all_gather_base_mm and\n"
    "larger cases, each checked against a float64 reference and timed against the unfused\n"
    "composition. Exit code 0 if every row passes, 1 on any FAIL.\n";

// Inputs are multiples of 1/8 in [-1, 1]: exact in fp16/bf16, and every fp32 sum of
// products is exact, so the only error left is the one final rounding.
float value(uint64_t seed, uint64_t i) {
  uint64_t h = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i + 7) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return static_cast<float>(static_cast<int>(h % 17) - 8) / 8.0f;
}

std::vector<uint8_t> make(uint64_t seed, size_t count, DType t) {
  std::vector<float> f(count);
  for (size_t i = 0; i < count; ++i) f[i] = value(seed, i);
  std::vector<uint8_t> out(count * static_cast<size_t>(dtype_bits(t) / 8));
  convert(f.data(), DType::kFloat32, out.data(), t, count);
  return out;
}

struct CaseResult {
  double max_err = 0, bound = 0, op_ms = 0, unfused_ms = 0;
  bool pass = false;
  std::string schedule;
};

// all_gather_matmul with global x1 (M, k) split over the ranks, x2 (k, n) different per rank.
CaseResult run_all_gather_matmul(Comm& comm, int64_t M, int64_t k, int64_t n, DType t,
                                 int samples) {
  const int R = comm.world_size(), me = comm.rank();
  const int64_t m = M / R;
  const size_t es = static_cast<size_t>(dtype_bits(t) / 8);
  auto x1 = make(100 + me, m * k, t);
  auto x2 = make(200 + me, k * n, t);
  std::vector<uint8_t> out(M * n * es), gathered(M * k * es);
  AllGatherMatmulPlan plan(TensorView(x1.data(), t, {m, k}), TensorView(x2.data(), t, {k, n}),
                           comm.name(), R, TensorView(out.data(), t, {M, n}),
                           TensorView(gathered.data(), t, {M, k}));
  std::vector<uint8_t> ws(plan.workspace_size());
  CaseResult res;
  res.schedule = plan.schedule_name();
  std::vector<uint8_t> g2(M * k * es), out2(M * n * es);
  const auto desc = kernels::cpu::dense_matmul_desc(M, k, n, t);
  const auto times =
      time_variants<2>(comm, samples,
                       {[&] { plan.execute(ws.empty() ? nullptr : ws.data(), ws.size()); },
                        [&] {  // the unfused composition
                          comm.all_gather(x1.data(), g2.data(), m * k, t);
                          kernels::cpu::matmul(desc, g2.data(), x2.data(), nullptr, out2.data());
                        }});
  res.op_ms = times[0];
  res.unfused_ms = times[1];
  // float64 reference: every rank's x1 is known from its seed.
  std::vector<float> outf(M * n), a_all(M * k), b(k * n);
  convert(out.data(), t, outf.data(), DType::kFloat32, M * n);
  for (int s = 0; s < R; ++s)
    for (int64_t i = 0; i < m * k; ++i) a_all[s * m * k + i] = value(100 + s, i);
  for (int64_t i = 0; i < k * n; ++i) b[i] = value(200 + me, i);
  bool gathered_ok = true;
  std::vector<float> gf(M * k);
  convert(gathered.data(), t, gf.data(), DType::kFloat32, M * k);
  for (int64_t i = 0; i < M * k; ++i) gathered_ok = gathered_ok && gf[i] == a_all[i];
  bool ok = gathered_ok;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        ref += static_cast<double>(a_all[i * k + p]) * b[p * n + j];
        mag += std::fabs(static_cast<double>(a_all[i * k + p]) * b[p * n + j]);
      }
      // One rounding of the output plus fp32 accumulation (exact here, kept for honesty).
      const double bound = unit_roundoff(t) * std::fabs(ref) + k * std::ldexp(1.0, -24) * mag;
      const double err = std::fabs(outf[i * n + j] - ref);
      res.max_err = std::max(res.max_err, err);
      res.bound = std::max(res.bound, bound);
      ok = ok && err <= bound;
    }
  res.pass = ok;
  return res;
}

}  // namespace

int cmd_demo_worker(int, char**) {
  auto comm = Comm::from_env();
  struct Case {
    const char* label;
    int64_t M, k, n;
    DType t;
    int samples;
  };
  const Case cases[] = {
      {"seed example", 128, 512, 64, DType::kFloat16, 15},
      {"larger, bfloat16", 512, 1024, 256, DType::kBFloat16, 15},
  };
  int failures = 0;
  if (comm->rank() == 0)
    std::printf("%-40s %-22s %-9s %5s %11s %11s %6s %10s %12s %8s  %s\n", "op / case",
                "shapes (global)", "dtype", "ranks", "max |err|", "bound", "result", "op ms",
                "unfused ms", "speedup", "schedule");
  for (const auto& c : cases) {
    CaseResult r = run_all_gather_matmul(*comm, c.M, c.k, c.n, c.t, c.samples);
    int32_t bad = r.pass ? 0 : 1, total_bad = 0;
    comm->all_reduce(&bad, &total_bad, 1, DType::kInt32);
    double worst[2] = {r.max_err, r.bound}, all[2 * kDemoRanks] = {};
    // Two doubles per rank, moved as raw 8-byte elements.
    if (comm->world_size() <= kDemoRanks) comm->all_gather(worst, all, 2, DType::kInt64);
    failures += total_bad;
    if (comm->rank() == 0) {
      double max_err = 0, bound = 0;
      for (int s = 0; s < comm->world_size(); ++s)
        max_err = std::max(max_err, all[2 * s]), bound = std::max(bound, all[2 * s + 1]);
      char shapes[64];
      std::snprintf(shapes, sizeof(shapes), "[%lld,%lld]x[%lld,%lld]", static_cast<long long>(c.M),
                    static_cast<long long>(c.k), static_cast<long long>(c.k),
                    static_cast<long long>(c.n));
      std::printf("%-40s %-22s %-9s %5d %11.3g %11.3g %6s %10.3f %12.3f %7.2fx  %s\n",
                  (std::string("all_gather_matmul: ") + c.label).c_str(), shapes,
                  std::string(dtype_name(c.t)).c_str(), comm->world_size(), max_err, bound,
                  total_bad == 0 ? "PASS" : "FAIL", r.op_ms, r.unfused_ms, r.unfused_ms / r.op_ms,
                  r.schedule.c_str());
    }
  }
  failures += demo_quant_all_gather_matmul_row(*comm);  // demo_quant.cpp
  failures += demo_alltoall_quant_matmul_row(*comm);
  failures += demo_quant_all_reduce_row(*comm);  // demo_quant.cpp
  return failures == 0 ? 0 : 1;
}

int cmd_demo(int argc, char** argv) {
  if (const auto rc = no_options(argc, argv, kUsage)) return *rc;
  std::printf("commfuse demo — 1. number formats (SPEC §1)\n\n");
  const int formats = cmd_selfcheck(1, argv);  // argv[0] only: selfcheck takes no options
  std::printf(
      "\ncommfuse demo — 2. operators across %d local ranks (commfuse launch), checked "
      "against float64\n\n",
      kDemoRanks);
  std::fflush(stdout);
  LaunchOptions opts;
  opts.nprocs = kDemoRanks;
  opts.grace_s = 5;
  opts.prefix = false;
  const int ops = launch(opts, {self_exe_path(), "demo-worker"});
  std::printf("\ndemo: %s\n", formats == 0 && ops == 0 ? "PASS" : "FAIL");
  return formats == 0 && ops == 0 ? 0 : 1;
}

}  // namespace commfuse::cli
