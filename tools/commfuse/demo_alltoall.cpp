// The demo's alltoall_quant_matmul row: A16W8 (bfloat16 activations, int8 weights, dynamic
// per-token quantization) across the demo's ranks, checked against float64 computed from a
// scalar transcription of SPEC §3's quantization, timed against the op's unfused algorithm
// (all_to_all, then permute, quantize, int GEMM and dequant as separate passes: the same
// kernels) like every other row, and, on a second line, against the unquantized path
// (all_to_all + permute + bfloat16 GEMM), which is what quantizing has to beat.
#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algo_scope.hpp"
#include "commands.hpp"
#include "demo_timing.hpp"
#include "kernels/cpu/matmul.hpp"

namespace commfuse::cli {
namespace {

float act(uint64_t seed, uint64_t i) {
  uint64_t h = (seed + 11) * 0x9E3779B97F4A7C15ull ^ (i + 3) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return (static_cast<float>(h % 4001) - 2000.0f) / 1000.0f;
}

int8_t weight(uint64_t seed, uint64_t i) {
  uint64_t h = (seed + 5) * 0xD6E8FEB86659FD93ull ^ (i + 1) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 31;
  return static_cast<int8_t>(static_cast<int>(h % 255) - 127);
}

}  // namespace

int demo_alltoall_quant_matmul_row(Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  const int64_t BS = 32 * R, rows = 32, H = 128, K = H * R, N = 128;
  const DType t = DType::kBFloat16;
  auto x1_of = [&](int s) {
    std::vector<float> f(static_cast<size_t>(BS * H));
    for (size_t i = 0; i < f.size(); ++i) f[i] = act(300 + s, i);
    std::vector<uint8_t> b(f.size() * 2);
    convert(f.data(), DType::kFloat32, b.data(), t, f.size());
    return b;
  };
  const auto x1 = x1_of(me);
  std::vector<int8_t> w(static_cast<size_t>(K * N));
  for (size_t i = 0; i < w.size(); ++i) w[i] = weight(400 + me, i);
  std::vector<float> x2s(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) x2s[j] = 0.002f + 0.0001f * static_cast<float>(j % 7);
  std::vector<uint8_t> out(static_cast<size_t>(rows * N) * 2);
  std::vector<uint8_t> out_unfused(out.size());
  auto make = [&](std::vector<uint8_t>& o) {
    return AlltoAllQuantMatmulPlan(TensorView(const_cast<uint8_t*>(x1.data()), t, {BS, H}),
                                   TensorView(w.data(), DType::kInt8, {K, N}),
                                   TensorView(x2s.data(), DType::kFloat32, {N}), comm.name(),
                                   TensorView(o.data(), t, {rows, N}));
  };
  AlltoAllQuantMatmulPlan plan =
      with_algorithm("alltoall_quant_matmul:fused", [&] { return make(out); });
  AlltoAllQuantMatmulPlan unfused =
      with_algorithm("alltoall_quant_matmul:unfused", [&] { return make(out_unfused); });
  std::vector<float> ws(std::max(plan.workspace_size(), unfused.workspace_size()) / sizeof(float) +
                        1);
  // The unquantized path for timing: all_to_all, permute, bf16 GEMM on the same weights.
  std::vector<float> wf(w.begin(), w.end());
  std::vector<uint8_t> wb(wf.size() * 2), recv(x1.size()), perm(x1.size()), out2(out.size());
  convert(wf.data(), DType::kFloat32, wb.data(), t, wf.size());
  const auto md = kernels::cpu::dense_matmul_desc(rows, K, N, t);
  const auto times = time_variants<3>(
      comm, 15,
      {[&] { plan.execute(ws.data(), plan.workspace_size()); },
       [&] { unfused.execute(ws.data(), unfused.workspace_size()); },
       [&] {  // all_to_all, permute, the 16-bit GEMM
         comm.all_to_all(x1.data(), recv.data(), static_cast<size_t>(rows * H), t);
         for (int64_t i = 0; i < rows; ++i)
           for (int s = 0; s < R; ++s)
             std::memcpy(perm.data() + (i * R + s) * H * 2, recv.data() + (s * rows + i) * H * 2,
                         static_cast<size_t>(H) * 2);
         kernels::cpu::matmul(md, perm.data(), wb.data(), nullptr, out2.data());
       }});
  // The two algorithms run the same kernels on the same values: the same bits (SPEC §3).
  const bool same_bits = out == out_unfused;

  // Reference: SPEC §3 quantization in fp32, then the product and epilogue in float64.
  std::vector<std::vector<float>> xs;
  for (int s = 0; s < R; ++s) {
    const auto b = x1_of(s);
    std::vector<float> f(static_cast<size_t>(BS * H));
    convert(b.data(), t, f.data(), DType::kFloat32, f.size());
    xs.push_back(std::move(f));
  }
  std::vector<float> got(static_cast<size_t>(rows * N));
  convert(out.data(), t, got.data(), DType::kFloat32, got.size());
  double max_err = 0, max_bound = 0;
  bool ok = true;
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<float> v(static_cast<size_t>(K));
    float amax = 0;
    for (int s = 0; s < R; ++s)
      for (int64_t u = 0; u < H; ++u) {
        v[s * H + u] = xs[s][(me * rows + i) * H + u];
        amax = std::max(amax, std::fabs(v[s * H + u]));
      }
    const float inv = 127.0f / amax, sc = amax / 127.0f;
    std::vector<int> q(static_cast<size_t>(K));
    for (int64_t p = 0; p < K; ++p)
      q[p] = static_cast<int>(std::clamp(std::nearbyint(v[p] * inv), -127.0f, 127.0f));
    for (int64_t j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int64_t p = 0; p < K; ++p) acc += int64_t{q[p]} * w[p * N + j];
      const double ref = static_cast<double>(acc) * x2s[j] * sc;
      const double bound =
          std::ldexp(1.0, -8) * std::fabs(ref) + 6 * std::ldexp(1.0, -24) * std::fabs(ref);
      const double err = std::fabs(got[i * N + j] - ref);
      max_err = std::max(max_err, err);
      max_bound = std::max(max_bound, bound);
      ok = ok && err <= bound;
    }
  }
  ok = ok && same_bits;
  int32_t bad = ok ? 0 : 1, total_bad = 0;
  comm.all_reduce(&bad, &total_bad, 1, DType::kInt32);
  double mine[2] = {max_err, max_bound}, all[2 * 64] = {};
  if (R <= 64) comm.all_gather(mine, all, 2, DType::kInt64);
  if (me == 0) {
    for (int s = 0; s < R && s < 64; ++s)
      max_err = std::max(max_err, all[2 * s]), max_bound = std::max(max_bound, all[2 * s + 1]);
    char shapes[64];
    std::snprintf(shapes, sizeof(shapes), "[%lld,%lld]x[%lld,%lld]", static_cast<long long>(BS * R),
                  static_cast<long long>(H), static_cast<long long>(K), static_cast<long long>(N));
    const double op_ms = times[0], unfused_ms = times[1], ref_ms = times[2];
    std::printf("%-40s %-22s %-9s %5d %11.3g %11.3g %6s %10.3f %12.3f %7.2fx  %s\n",
                "alltoall_quant_matmul: A16W8", shapes, "bfloat16", R, max_err, max_bound,
                total_bad == 0 ? "PASS" : "FAIL", op_ms, unfused_ms, unfused_ms / op_ms,
                plan.schedule_name());
    std::printf("%-40s %-22s %-9s %5s %11s %11s %6s %10.3f %12.3f %7.2fx  %s\n",
                "  the same, vs the bfloat16 path", "", "", "", "", "", "", op_ms, ref_ms,
                ref_ms / op_ms, "all_to_all, permute, bf16 GEMM");
  }
  return total_bad;
}

}  // namespace commfuse::cli
