#include "demo_quant.hpp"

#include "algo_scope.hpp"
#include "demo_timing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace commfuse::cli {
namespace {

constexpr int64_t kRows = 512, kH = 1024;

// Rank r's unquantized input, computable on any rank for the reference.
std::vector<float> input(int rank) {
  std::vector<float> x(static_cast<size_t>(kRows * kH));
  for (size_t i = 0; i < x.size(); ++i) {
    uint64_t h = (static_cast<uint64_t>(rank) + 11) * 0x9E3779B97F4A7C15ull ^
                 (i + 3) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    x[i] = (static_cast<float>(h % 2001) - 1000.0f) / 250.0f;
  }
  return x;
}

void quantize_kg(const std::vector<float>& x, std::vector<int8_t>& q, std::vector<float>& s) {
  q.resize(x.size());
  s.resize(static_cast<size_t>(kRows * kH / 128));
  quantize(TensorView(x.data(), DType::kFloat32, {kRows, kH}), "per_token_group",
           TensorView(q.data(), DType::kInt8, {kRows, kH}),
           TensorView(s.data(), DType::kFloat32, {kRows, kH / 128}));
}

// One row in cmd_demo's columns on rank 0: the worst error and bound over the ranks, the
// mean times. Returns the number of ranks whose check failed (the same on every rank).
int print_row(Comm& comm, const char* label, const char* shapes, const char* dtype, bool ok,
              double max_err, double bound, double op_ms, double unfused_ms, const char* schedule) {
  const int R = comm.world_size();
  int32_t bad = ok ? 0 : 1, total_bad = 0;
  comm.all_reduce(&bad, &total_bad, 1, DType::kInt32);
  double mine[4] = {max_err, bound, op_ms, unfused_ms}, worst[4] = {};
  std::vector<double> all(static_cast<size_t>(4 * R));
  comm.all_gather(mine, all.data(), 4, DType::kInt64);  // doubles moved as 8-byte elements
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < 4; ++k)
      worst[k] = k < 2 ? std::max(worst[k], all[static_cast<size_t>(4 * r + k)])
                       : worst[k] + all[static_cast<size_t>(4 * r + k)] / R;  // times: mean
  if (comm.rank() == 0)
    std::printf("%-40s %-22s %-9s %5d %11.3g %11.3g %6s %10.3f %12.3f %7.2fx  %s\n", label, shapes,
                dtype, R, worst[0], worst[1], total_bad == 0 ? "PASS" : "FAIL", worst[2], worst[3],
                worst[3] / worst[2], schedule);
  return total_bad;
}

}  // namespace

int demo_quant_all_reduce_row(Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  std::vector<int8_t> q;
  std::vector<float> s;
  quantize_kg(input(me), q, s);
  const size_t n = q.size();
  std::vector<float> out(n), deq(n), out2(n);
  QuantAllReducePlan plan(TensorView(q.data(), DType::kInt8, {kRows, kH}),
                          TensorView(s.data(), DType::kFloat32, {kRows, kH / 128}), comm.name(),
                          "sum", TensorView(out.data(), DType::kFloat32, {kRows, kH}));
  std::vector<float> ws(plan.workspace_size() / sizeof(float) + 1);
  const auto [op_ms, unfused_ms] = time_variants<2>(
      comm, 15,
      {[&] { plan.execute(ws.data(), plan.workspace_size()); },
       [&] {  // the unfused composition: dequantize, then a float32 all_reduce
         dequantize(TensorView(q.data(), DType::kInt8, {kRows, kH}),
                    TensorView(s.data(), DType::kFloat32, {kRows, kH / 128}), "per_token_group",
                    TensorView(deq.data(), DType::kFloat32, {kRows, kH}));
         comm.all_reduce(deq.data(), out2.data(), n, DType::kFloat32);
       }});
  // float64 reference: Σ_r q_r · scale_r, every rank's input regenerated here.
  std::vector<double> ref(n, 0.0), mag(n, 0.0);
  std::vector<int8_t> qr;
  std::vector<float> sr;
  for (int r = 0; r < R; ++r) {
    quantize_kg(input(r), qr, sr);
    for (size_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(qr[i]) * sr[i / 128];
      ref[i] += t;
      mag[i] += std::fabs(t);
    }
  }
  double max_err = 0, bound = 0;
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    // fp32 products and R-1 fp32 additions, output float32 (its rounding is the last add's).
    const double b = (R + 1) * std::ldexp(1.0, -24) * mag[i];
    const double err = std::fabs(out[i] - ref[i]);
    max_err = std::max(max_err, err);
    bound = std::max(bound, b);
    ok = ok && err <= b;
  }
  char shapes[64];
  std::snprintf(shapes, sizeof(shapes), "[%lld,%lld] kg", static_cast<long long>(kRows),
                static_cast<long long>(kH));
  return print_row(comm, "quant_all_reduce: int8 -> float32", shapes, "int8", ok, max_err, bound,
                   op_ms, unfused_ms, plan.schedule_name());
}

int demo_quant_all_gather_matmul_row(Comm& comm) {
  // A8W8 (SPEC §6): int8 codes over the whole range, per-token x1 and per-channel x2 scales
  // that are powers of two, so the float64 reference is exact and the output (bfloat16)
  // must be it rounded once.
  constexpr int64_t M = 512, K = 1024, N = 256;
  const int R = comm.world_size(), me = comm.rank();
  const int64_t m = M / R;
  auto code = [](int rank, uint64_t i, uint64_t salt) {
    uint64_t h = (static_cast<uint64_t>(rank) + salt) * 0x9E3779B97F4A7C15ull ^
                 (i + 5) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 31;
    return static_cast<int8_t>(static_cast<int>(h % 256) - 128);
  };
  auto pow2 = [](int rank, uint64_t i) {
    return std::ldexp(1.0f, -static_cast<int>((static_cast<uint64_t>(rank) * 7 + i) % 9) - 6);
  };
  std::vector<int8_t> x1(static_cast<size_t>(m * K)), x2(static_cast<size_t>(K * N));
  std::vector<float> s1(static_cast<size_t>(m)), s2(static_cast<size_t>(N));
  for (size_t i = 0; i < x1.size(); ++i) x1[i] = code(me, i, 21);
  for (size_t i = 0; i < x2.size(); ++i) x2[i] = code(me, i, 41);
  for (size_t i = 0; i < s1.size(); ++i) s1[i] = pow2(me, i);
  for (size_t j = 0; j < s2.size(); ++j) s2[j] = pow2(me + 100, j);
  std::vector<uint16_t> out(static_cast<size_t>(M * N)), out_u(out.size());
  std::vector<int8_t> gathered(static_cast<size_t>(M * K)), gathered_u(gathered.size());
  AllGatherMatmulOptions o;
  o.x1_scale = TensorView(s1.data(), DType::kFloat32, {m});
  o.x2_scale = TensorView(s2.data(), DType::kFloat32, {N});
  auto make = [&](void* y, void* g) {
    return AllGatherMatmulPlan(TensorView(x1.data(), DType::kInt8, {m, K}),
                               TensorView(x2.data(), DType::kInt8, {K, N}), comm.name(), R,
                               TensorView(y, DType::kBFloat16, {M, N}),
                               TensorView(g, DType::kInt8, {M, K}), o);
  };
  AllGatherMatmulPlan plan = make(out.data(), gathered.data());  // the list's choice
  AllGatherMatmulPlan unfused = with_algorithm(
      "all_gather_matmul:unfused", [&] { return make(out_u.data(), gathered_u.data()); });
  std::vector<float> ws(std::max(plan.workspace_size(), unfused.workspace_size()) / 4 + 1);
  const auto [op_ms, unfused_ms] =
      time_variants<2>(comm, 15,
                       {[&] { plan.execute(ws.data(), plan.workspace_size()); },
                        [&] { unfused.execute(ws.data(), unfused.workspace_size()); }});
  // float64 reference of rank `me`'s output: every rank's rows and scales regenerated here.
  std::vector<float> got(out.size());
  convert(out.data(), DType::kBFloat16, got.data(), DType::kFloat32, out.size());
  bool ok = out == out_u;  // the same quantized product either way: the same bits
  double max_err = 0, bound = 0;
  for (int s = 0; s < R; ++s)
    for (int64_t i = 0; i < m; ++i) {
      const int64_t row = s * m + i;
      for (int64_t t = 0; t < K; ++t)
        ok = ok && gathered[static_cast<size_t>(row * K + t)] ==
                       code(s, static_cast<uint64_t>(i * K + t), 21);
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t t = 0; t < K; ++t)
          acc += static_cast<double>(code(s, static_cast<uint64_t>(i * K + t), 21)) *
                 x2[static_cast<size_t>(t * N + j)];
        const double ref = acc * (static_cast<double>(pow2(s, static_cast<uint64_t>(i))) *
                                  s2[static_cast<size_t>(j)]);
        const double b = std::ldexp(1.0, -8) * std::fabs(ref);  // one bfloat16 rounding
        const double err = std::fabs(got[static_cast<size_t>(row * N + j)] - ref);
        max_err = std::max(max_err, err);
        bound = std::max(bound, b);
        ok = ok && err <= b;
      }
    }
  char shapes[64];
  std::snprintf(shapes, sizeof(shapes), "[%lld,%lld]x[%lld,%lld]", static_cast<long long>(M),
                static_cast<long long>(K), static_cast<long long>(K), static_cast<long long>(N));
  return print_row(comm, "all_gather_matmul: A8W8 -> bfloat16", shapes, "int8", ok, max_err, bound,
                   op_ms, unfused_ms, plan.schedule_name());
}

}  // namespace commfuse::cli
