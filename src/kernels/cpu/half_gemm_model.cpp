#include "kernels/cpu/half_gemm_model.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <vector>

#include "core/convert_fast.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/probe_timing.hpp"
#include "kernels/cpu/small_m_gemm.hpp"

namespace commfuse::kernels::cpu {
namespace {

// The probe: large enough that both kernels run at their steady rate (b is 2 MiB as fp16,
// 4 MiB as fp32), small enough to cost ~20 ms once per process.
constexpr int64_t kProbeM = 128, kProbeK = 1024, kProbeN = 1024;
constexpr int kProbeRuns = 3;  // best of, after one warm-up run
// Widened must be expected this much faster before it is chosen (see the header).
constexpr double kWidenMargin = 0.85;

// Few rows, native against the direct kernel: each timed at every probe row count of a
// k = n = 512 product (b 512 KiB, as decode and tiny calls stream it); the direct kernel is
// chosen up to the last probe count from 1 where it stays under kWidenMargin of the native
// time (between counts it is not interpolated: 1-2 rows take its in-register path, 3 and
// more another one). Both read b in place: no conversion term.
constexpr int64_t kFewK = 512, kFewN = 512;
constexpr int kFewRuns = 5;

void measure_few_rows(DType t, FewRowsModel& m) {
  const uint16_t one = t == DType::kFloat16 ? 0x3c00 : 0x3f80;
  const int64_t most = kFewRows[std::size(kFewRows) - 1];
  std::vector<uint16_t> a(static_cast<size_t>(most * kFewK), one), b(kFewK * kFewN, one),
      c(static_cast<size_t>(most * kFewN));
  m.direct_rows = 0;
  bool winning = true;
  for (size_t i = 0; i < std::size(kFewRows); ++i) {
    MatmulDesc d = dense_matmul_desc(kFewRows[i], kFewK, kFewN, t);
    d.half_path = HalfPath::kNative;
    const auto native = plan_matmul(d);
    d.half_path = HalfPath::kWidened;  // few rows: the direct kernel (small_m_gemm.hpp)
    const auto direct = plan_matmul(d);
    m.native_ns[i] =
        best_probe_ns([&] { matmul(*native, a.data(), b.data(), nullptr, c.data()); }, kFewRuns);
    m.direct_ns[i] =
        best_probe_ns([&] { matmul(*direct, a.data(), b.data(), nullptr, c.data()); }, kFewRuns);
    winning = winning && m.direct_ns[i] < kWidenMargin * m.native_ns[i];
    if (winning) m.direct_rows = kFewRows[i];
  }
}

// The direct kernel's rate (no native kernel): kDirectProbeM rows of kFewK x kFewN.
double measure_direct_macs_per_ns(DType t) {
  const uint16_t one = t == DType::kFloat16 ? 0x3c00 : 0x3f80;
  std::vector<uint16_t> a(static_cast<size_t>(kDirectProbeM * kFewK), one), b(kFewK * kFewN, one),
      c(static_cast<size_t>(kDirectProbeM * kFewN));
  MatmulDesc d = dense_matmul_desc(kDirectProbeM, kFewK, kFewN, t);
  d.half_path = HalfPath::kWidened;  // up to kSmallMRows rows: the direct kernel
  const auto direct = plan_matmul(d);
  const double macs = static_cast<double>(kDirectProbeM * kFewK * kFewN);
  return macs /
         best_probe_ns([&] { matmul(*direct, a.data(), b.data(), nullptr, c.data()); }, kFewRuns);
}

HalfGemmModel measure(DType t) {
  HalfGemmModel m;
  MatmulDesc native_desc = dense_matmul_desc(kProbeM, kProbeK, kProbeN, t);
  native_desc.half_path = HalfPath::kNative;
  const auto native = plan_matmul(native_desc);
  m.native = !widens_inputs(*native);  // kNative falls back to widening where none exists
  const std::string pin = params::kernel_pin("COMMFUSE_HALF_GEMM", "native");
  if (pin != "auto") m.forced = pin;
  if (!m.forced.empty()) return m;

  // The kernel a widened GEMM runs: oneDNN's (OpenBLAS takes fp32 inputs only).
  MatmulDesc f32_desc = dense_matmul_desc(kProbeM, kProbeK, kProbeN, DType::kFloat32);
  f32_desc.provider = GemmProvider::kOneDnn;
  const auto f32 = plan_matmul(f32_desc);
  // 1.0 in either format: the rates do not depend on the values.
  const uint16_t one = t == DType::kFloat16 ? 0x3c00 : 0x3f80;
  std::vector<uint16_t> a16(kProbeM * kProbeK, one), b16(kProbeK * kProbeN, one),
      c16(kProbeM * kProbeN);
  std::vector<float> a32(a16.size(), 1.0f), b32(b16.size(), 1.0f), c32(c16.size());
  const double macs = static_cast<double>(kProbeM * kProbeK * kProbeN);
  if (m.native)
    m.native_macs_per_ns =
        macs / best_probe_ns([&] { matmul(*native, a16.data(), b16.data(), nullptr, c16.data()); },
                             kProbeRuns);
  else
    m.direct_macs_per_ns = measure_direct_macs_per_ns(t);
  m.probe_threads = std::max(1, compute_threads());
  m.f32_macs_per_ns =
      macs /
      best_probe_ns([&] { matmul(*f32, a32.data(), b32.data(), nullptr, c32.data()); }, kProbeRuns);
  const double widen_ns = best_probe_ns(
      [&] {
        if (t == DType::kFloat16)
          fast::f16_to_f32(b16.data(), b32.data(), b16.size());
        else
          fast::bf16_to_f32(b16.data(), b32.data(), b16.size());
      },
      kProbeRuns);
  m.widen_ns_per_element = widen_ns / static_cast<double>(b16.size());
  return m;
}

FewRowsModel measure_few(DType t) {
  FewRowsModel m;
  // Asked at kProbeM rows, as measure() does: a native plan of few rows falls back to the
  // direct kernel, not to widening, where there is no native kernel.
  MatmulDesc d = dense_matmul_desc(kProbeM, kFewK, kFewN, t);
  d.half_path = HalfPath::kNative;
  const bool native = !widens_inputs(*plan_matmul(d));  // else no kernel to beat
  if (!native || params::kernel_pin("COMMFUSE_HALF_GEMM", "native") != "auto") return m;
  m.usable = true;
  measure_few_rows(t, m);
  return m;
}

}  // namespace

const HalfGemmModel& half_gemm_model(DType t) {
  CF_ASSERT(t == DType::kFloat16 || t == DType::kBFloat16);
  static std::once_flag once[2];
  static HalfGemmModel model[2];
  const int i = t == DType::kFloat16 ? 0 : 1;
  bool measured = false;
  std::call_once(once[i], [&] {
    model[i] = measure(t);
    measured = true;
  });
  if (measured && log::verbose_level() >= 1) log::verbose(describe_half_gemm_model(t));
  return model[i];
}

const FewRowsModel& few_rows_model(DType t) {
  CF_ASSERT(t == DType::kFloat16 || t == DType::kBFloat16);
  static std::once_flag once[2];
  static FewRowsModel model[2];
  const int i = t == DType::kFloat16 ? 0 : 1;
  std::call_once(once[i], [&] { model[i] = measure_few(t); });
  return model[i];
}

namespace {

// The model's two estimates (ns) for an m x k x n GEMM.
struct Estimate {
  double native, widened;
};

Estimate estimate(const HalfGemmModel& mo, int64_t m, int64_t k, int64_t n, bool narrow_c) {
  const double macs = static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  const double converted = static_cast<double>(m) * static_cast<double>(k) +
                           static_cast<double>(k) * static_cast<double>(n) +
                           (narrow_c ? static_cast<double>(m) * static_cast<double>(n) : 0.0);
  return {macs / mo.native_macs_per_ns,
          macs / mo.f32_macs_per_ns + converted * mo.widen_ns_per_element};
}

bool direct_pays(const FewRowsModel& mo, int64_t m) {
  return mo.usable && m >= 1 && m <= mo.direct_rows;
}

}  // namespace

bool direct_pays(DType t, int64_t m) {
  return direct_pays(few_rows_model(t), m);
}

bool direct_beats_widening(DType t, int64_t m, int64_t k, int64_t n, bool narrow_c) {
  const HalfGemmModel& mo = half_gemm_model(t);
  if (mo.native || !mo.forced.empty() || mo.direct_macs_per_ns <= 0) return true;
  // The probe widened and multiplied a b of kProbeK x kProbeN (4 MiB as fp32) in cache. A
  // larger b is widened to memory and read back from it, which the rates do not see: fp16
  // 16 x 4096 x 4096 (AMD EPYC Zen 4) ran 16-21 ms widened against 14.3-14.8 direct.
  if (k <= 0 || n <= 0 || k > kProbeK * kProbeN / n) return true;
  const double macs = static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  const double widened = estimate(mo, m, k, n, narrow_c).widened;
  // The direct kernel splits its work over column tiles only (small_m_gemm.cpp): with
  // several compute threads its rate scales with the tiles that n and the probe's n give.
  auto busy = [&](int64_t cols) {
    return static_cast<double>(
        std::min<int64_t>(mo.probe_threads, (cols + kSmallMColumnTile - 1) / kSmallMColumnTile));
  };
  const double direct_rate = mo.direct_macs_per_ns * busy(n) / busy(kFewN);
  return !(widened < kWidenMargin * macs / direct_rate);
}

bool widening_pays(DType t, int64_t m, int64_t k, int64_t n, bool narrow_c) {
  const HalfGemmModel& mo = half_gemm_model(t);
  if (!mo.native || mo.forced == "native") return false;
  if (mo.forced == "float32") return true;
  const Estimate e = estimate(mo, m, k, n, narrow_c);
  return e.widened < kWidenMargin * e.native;
}

namespace {

// The few-rows probe's slot for m rows: the smallest probe count >= m, or the last.
size_t few_slot(int64_t m) {
  size_t i = 0;
  while (i + 1 < std::size(kFewRows) && kFewRows[i] < m) ++i;
  return i;
}

int direct_calls_bit(DType t, int64_t m) {
  return (t == DType::kFloat16 ? 0 : 8) + static_cast<int>(m) - 1;
}

}  // namespace

bool direct_calls_pay(const FewRowsModel& mo, int64_t m, int64_t calls) {
  if (calls < 2 || !direct_pays(mo, m)) return false;
  const size_t each = few_slot(m), all = few_slot(m * calls);
  const double one_call = direct_pays(mo, m * calls) ? mo.direct_ns[all] : mo.native_ns[all];
  return static_cast<double>(calls) * mo.direct_ns[each] < one_call;
}

uint32_t direct_calls_mask(int64_t calls) {
  uint32_t mask = 0;
  for (const DType t : {DType::kFloat16, DType::kBFloat16}) {
    const FewRowsModel now = measure_few(t);
    for (int64_t m = 1; m <= kDirectCallsRows; ++m)
      if (direct_calls_pay(now, m, calls)) mask |= 1u << direct_calls_bit(t, m);
  }
  return mask;
}

bool direct_calls_pay(uint32_t mask, DType t, int64_t m) {
  if (m < 1 || m > kDirectCallsRows || (t != DType::kFloat16 && t != DType::kBFloat16))
    return false;
  return (mask >> direct_calls_bit(t, m) & 1u) != 0;
}

std::string describe_half_gemm_model(DType t) {
  const HalfGemmModel& mo = half_gemm_model(t);
  const char* name = t == DType::kFloat16 ? "float16" : "bfloat16";
  if (!mo.forced.empty())
    return detail::cat(name, " GEMM: ", mo.forced,
                       " (pinned: COMMFUSE_HALF_GEMM, or COMMFUSE_DETERMINISTIC=1)",
                       mo.native ? "" : "; no native oneDNN kernel here");
  if (!mo.native) {
    int64_t direct_rows = 0;  // at the probe's k and n (a larger b stays direct)
    for (int64_t m = 1; m <= kSmallMRows && direct_beats_widening(t, m, kProbeK, kProbeN, true);
         ++m)
      direct_rows = m;
    return detail::cat(name, " GEMM: no native oneDNN kernel here; direct ",
                       mo.direct_macs_per_ns * 2, " GFLOP/s (", kDirectProbeM, "x", kFewK, "x",
                       kFewN, "), fp32 ", mo.f32_macs_per_ns * 2, " GFLOP/s, widening ",
                       1.0 / mo.widen_ns_per_element, " G elements/s -> at k = n = ", kProbeK,
                       ": direct ",
                       direct_rows > 0 ? detail::cat("up to m=", direct_rows) : "never",
                       ", widened to fp32 beyond (direct for any m where b is larger)");
  }
  std::string s = detail::cat(name, " GEMM: native ", mo.native_macs_per_ns * 2, " GFLOP/s, fp32 ",
                              mo.f32_macs_per_ns * 2, " GFLOP/s, widening ",
                              1.0 / mo.widen_ns_per_element, " G elements/s (", kProbeM, "x",
                              kProbeK, "x", kProbeN, " probe) -> at k = n = 4096:");
  for (const int64_t m : {16, 256, 2048})
    s += detail::cat(" m=", m, " ", widening_pays(t, m, 4096, 4096, true) ? "widened" : "native");
  const FewRowsModel& few = few_rows_model(t);
  s += detail::cat("; few rows of ", kFewK, "x", kFewN, " (native / direct us):");
  for (size_t i = 0; i < std::size(kFewRows); ++i)
    s +=
        detail::cat(" m=", kFewRows[i], " ", few.native_ns[i] / 1e3, " / ", few.direct_ns[i] / 1e3);
  s += detail::cat(" -> direct ",
                   few.direct_rows > 0 ? detail::cat("up to m=", few.direct_rows) : "never");
  return s;
}

}  // namespace commfuse::kernels::cpu
