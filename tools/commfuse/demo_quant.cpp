#include "demo_quant.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
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

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  using Clock = std::chrono::steady_clock;
  std::vector<double> op_t, unfused_t;
  for (int it = 0; it < 11; ++it) {  // the first round is warm-up
    comm.barrier();
    auto t0 = Clock::now();
    plan.execute(ws.data(), plan.workspace_size());
    const double a = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    comm.barrier();
    t0 = Clock::now();  // the unfused composition: dequantize, then a float32 all_reduce
    dequantize(TensorView(q.data(), DType::kInt8, {kRows, kH}),
               TensorView(s.data(), DType::kFloat32, {kRows, kH / 128}), "per_token_group",
               TensorView(deq.data(), DType::kFloat32, {kRows, kH}));
    comm.all_reduce(deq.data(), out2.data(), n, DType::kFloat32);
    const double b = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (it > 0) op_t.push_back(a), unfused_t.push_back(b);
  }
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
  int32_t bad = ok ? 0 : 1, total_bad = 0;
  comm.all_reduce(&bad, &total_bad, 1, DType::kInt32);
  double mine[4] = {max_err, bound, median_ms(op_t), median_ms(unfused_t)}, worst[4] = {};
  std::vector<double> all(static_cast<size_t>(4 * R));
  comm.all_gather(mine, all.data(), 4, DType::kInt64);  // doubles moved as 8-byte elements
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < 4; ++k)
      worst[k] = k < 2 ? std::max(worst[k], all[static_cast<size_t>(4 * r + k)])
                       : worst[k] + all[static_cast<size_t>(4 * r + k)] / R;  // times: mean
  if (me == 0) {
    char shapes[64];
    std::snprintf(shapes, sizeof(shapes), "[%lld,%lld] kg", static_cast<long long>(kRows),
                  static_cast<long long>(kH));
    std::printf("%-40s %-22s %-9s %5d %11.3g %11.3g %6s %10.3f %12.3f %7.2fx  %s\n",
                "quant_all_reduce: int8 -> float32", shapes, "int8", R, worst[0], worst[1],
                total_bad == 0 ? "PASS" : "FAIL", worst[2], worst[3], worst[3] / worst[2],
                plan.schedule_name());
  }
  return total_bad;
}

}  // namespace commfuse::cli
