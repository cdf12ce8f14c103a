#include "kernels/cpu/f32_gemm_model.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/openblas.hpp"
#include "kernels/cpu/probe_timing.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::kernels::cpu {
namespace {

constexpr int kProbeRuns = 3;  // best of, after one warm-up run
constexpr double kMargin = 1.05;

struct Probe {
  int64_t m, k, n;
};
// Probes of the shapes where the two differ as they do at the real ones (two ranks of the
// AMX Xeon, one thread each, oneDNN / OpenBLAS GFLOP/s): 32x1024x1024 77 / 80 but
// 32x2048x2048 81 / 70 (and 32x4096x4096 GEMMs of a decode ran 13.6 / 20.5 ms), so the
// few-rows probe has wide b; 2048x512x2048 147 / 154 but 1024x2048x2048 149 / 160, nearer
// 2048x4096x4096's 150 / 176, so the large one has deep k and wide n.
constexpr Probe kFew{kF32FewRows, 2048, 2048}, kMid{256, 1024, 1024}, kLarge{1024, 2048, 2048};

// Multiply-adds per ns of the probe on each provider: {oneDNN, OpenBLAS}.
std::pair<double, double> rates(const Probe& p) {
  // Values that are not special: the rates do not depend on them.
  std::vector<float> a(static_cast<size_t>(p.m * p.k), 0.5f),
      b(static_cast<size_t>(p.k * p.n), 0.25f), c(static_cast<size_t>(p.m * p.n));
  const double macs = static_cast<double>(p.m * p.k * p.n);
  auto rate = [&](GemmProvider provider) {
    MatmulDesc d = dense_matmul_desc(p.m, p.k, p.n, DType::kFloat32);
    d.provider = provider;
    const auto plan = plan_matmul(d);
    return macs /
           best_probe_ns([&] { matmul(*plan, a.data(), b.data(), nullptr, c.data()); }, kProbeRuns);
  };
  const double onednn = rate(GemmProvider::kOneDnn);
  return {onednn, rate(GemmProvider::kOpenBlas)};
}

// COMMFUSE_F32_GEMM, read once: openblas_pays runs on every fp32 plan lookup, and reading a
// parameter allocates.
const std::string& pinned() {
  static const std::string pin = params::kernel_pin("COMMFUSE_F32_GEMM", "onednn");
  return pin;
}

F32GemmModel measure() {
  F32GemmModel mo;
  if (!openblas_available()) {
    mo.openblas_unavailable = openblas_unavailable();
    return mo;
  }
  const std::string& pin = pinned();
  if (pin != "auto") {
    mo.forced = pin;
    return mo;
  }
  std::tie(mo.onednn_few, mo.openblas_few) = rates(kFew);
  std::tie(mo.onednn_mid, mo.openblas_mid) = rates(kMid);
  return mo;
}

// Set once the large probe's rates are written: describe_f32_gemm_model, which does not
// wait for that probe, reads them only then (another thread may be measuring them).
std::atomic<bool>& large_measured() {
  static std::atomic<bool> done{false};
  return done;
}

bool measured_auto(const F32GemmModel& mo) {
  return mo.openblas_unavailable.empty() && mo.forced.empty();
}

}  // namespace

const F32GemmModel& f32_gemm_model(bool large) {
  static std::once_flag once, once_large;
  static F32GemmModel model;
  bool measured = false;
  std::call_once(once, [&] {
    model = measure();
    measured = true;
  });
  if (large && measured_auto(model))
    std::call_once(once_large, [&] {
      std::tie(model.onednn_large, model.openblas_large) = rates(kLarge);
      large_measured().store(true, std::memory_order_release);
      measured = true;
    });
  if (measured && log::verbose_level() >= 1) log::verbose(describe_f32_gemm_model());
  return model;
}

bool openblas_pays(int64_t m, int64_t k, int64_t n, int threads) {
  if (threads != 1 && pinned() != "openblas") return false;
  const bool large = m * k >= kF32LargeMacs / n;  // m·k·n >= kF32LargeMacs, without overflow
  const F32GemmModel& mo = f32_gemm_model(large && m > kF32FewRows);
  if (!measured_auto(mo)) return mo.forced == "openblas";
  if (m <= kF32FewRows) return mo.openblas_few >= kMargin * mo.onednn_few;
  // No margin for the large class: its probe understates OpenBLAS's lead at the real shapes
  // (1024x2048x2048 measured 1.03-1.07x where 2048x4096x4096 ran 1.12-1.18x), so a tie
  // already points to OpenBLAS.
  if (large) return mo.openblas_large >= mo.onednn_large;
  return mo.openblas_mid >= kMargin * mo.onednn_mid;
}

std::string describe_f32_gemm_model() {
  const F32GemmModel& mo = f32_gemm_model();
  if (!mo.openblas_unavailable.empty())
    return detail::cat("float32 GEMM: oneDNN (OpenBLAS unavailable: ", mo.openblas_unavailable,
                       ")");
  if (!mo.forced.empty())
    return detail::cat("float32 GEMM: ", mo.forced,
                       " (pinned: COMMFUSE_F32_GEMM, or COMMFUSE_DETERMINISTIC=1)");
  auto cls = [&](const char* name, const Probe& p, double onednn, double openblas) {
    if (onednn == 0) return detail::cat(name, " ", p.m, "x", p.k, "x", p.n, " not measured yet");
    return detail::cat(
        name, " ", p.m, "x", p.k, "x", p.n, " oneDNN ", onednn * 2, " / OpenBLAS ", openblas * 2,
        " GFLOP/s -> ",
        openblas >= (p.m == kLarge.m ? 1.0 : kMargin) * onednn ? "OpenBLAS" : "oneDNN");
  };
  const bool large = large_measured().load(std::memory_order_acquire);
  if (const int threads = compute_threads(); threads != 1)
    return detail::cat("float32 GEMM: oneDNN with ", threads,
                       " compute threads (OpenBLAS is chosen by measurement with one thread a "
                       "rank, e.g. two ranks on two cores)");
  return detail::cat(
      "float32 GEMM (one probe per class of shape): ",
      cls("few rows", kFew, mo.onednn_few, mo.openblas_few), "; ",
      cls("mid", kMid, mo.onednn_mid, mo.openblas_mid), "; ",
      cls("large", kLarge, large ? mo.onednn_large : 0.0, large ? mo.openblas_large : 0.0));
}

}  // namespace commfuse::kernels::cpu
