// `commfuse bench quant-all-reduce|quant-reduce-scatter`: the fused quantized reduction
// against, in the same processes and run, OpenMPI's float32 collective of the same element
// count (MPI_Allreduce / MPI_Reduce_scatter_block) and commfuse's own bfloat16 and float32
// collective. Sizes (-b/-e) are elements of the logical (unquantized) tensor; rows of
// H = 1024. Rounds alternate between the four and the median of each is reported.
#include <mpi.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_buffer.hpp"
#include "bench_json.hpp"
#include "bench_quant.hpp"
#include "bench_timing.hpp"
#include "core/error.hpp"
#include "roundoff.hpp"

namespace commfuse::cli {
namespace {

constexpr int64_t kH = 1024;

// Rank r's logical input, any element computable on any rank (for the check).
float input_value(int rank, uint64_t i) {
  uint64_t z =
      (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
  return (static_cast<float>(z >> 40) / 8388608.0f - 1.0f) * 4.0f;
}

struct Quantized {
  Bytes codes, scales;
};

Quantized quantize_rows(int rank, int64_t row0, int64_t rows, DType xt, bool mx) {
  std::vector<float> x(static_cast<size_t>(rows * kH));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = input_value(rank, static_cast<uint64_t>(row0 * kH) + i);
  Quantized q;
  q.codes.resize(x.size());
  q.scales.resize(static_cast<size_t>(rows * kH / 32));  // K-G: H/128 floats; MX: H/32 bytes
  quantize(TensorView(x.data(), DType::kFloat32, {rows, kH}), mx ? "mx" : "per_token_group",
           TensorView(q.codes.data(), xt, {rows, kH}),
           mx ? TensorView(q.scales.data(), DType::kFloat8E8M0, {rows, kH / 64, 2})
              : TensorView(q.scales.data(), DType::kFloat32, {rows, kH / 128}));
  return q;
}

TensorView scales_view(const Quantized& q, bool mx, int64_t rows) {
  return mx ? TensorView(q.scales.data(), DType::kFloat8E8M0, {rows, kH / 64, 2})
            : TensorView(q.scales.data(), DType::kFloat32, {rows, kH / 128});
}

}  // namespace

int run_quant_bench(int rank, int R, const BenchOptions& o) {
  const std::string init =
      o.transport == "mpi" ? std::string("mpi") : "tcp://127.0.0.1:" + std::to_string(o.port);
  Comm comm(rank, R, init);
  JsonRows json_rows(rank == 0 ? o.json : std::string());
  JsonRows* const json = json_rows.enabled() ? &json_rows : nullptr;
  const bool rs = o.op == "quant-reduce-scatter";
  const bool mx = o.scales == "mx";
  const DType xt = dtype_from_name(o.dtype), ot = dtype_from_name(o.out_dtype);
  const size_t oes = static_cast<size_t>(dtype_bits(ot) / 8);
  if (rank == 0) {
    std::printf(
        "# commfuse bench %s: %d ranks, transport %s (%s), x %s, scales %s, output %s, "
        "H %lld, median of %d rounds\n",
        o.op.c_str(), R, comm.transport_name(),
        o.transport == "mpi" ? "MPI over TCP" : "shared memory", o.dtype.c_str(),
        mx ? "mx (e8m0, group 32)" : "kg (fp32, group 128)", o.out_dtype.c_str(),
        static_cast<long long>(kH), o.rounds);
    std::printf(
        "# baselines in the same processes: OpenMPI %s float32 (%s), commfuse %s "
        "bfloat16 and float32; ratios = baseline time / fused time\n",
        rs ? "MPI_Reduce_scatter_block" : "MPI_Allreduce",
        o.transport == "mpi" ? "btl tcp,self" : "default btl: shared memory",
        rs ? "reduce_scatter" : "all_reduce");
    std::printf("%11s %12s %12s %11s %9s %7s %11s %11s %11s %8s %8s %8s\n", "elements",
                "logical(B)", "wire(B)", "fused(us)", "algbw", "#wrong", "mpi_f32", "cf_bf16",
                "cf_f32", "mpi/fus", "bf16/fus", "f32/fus");
  }
  int rc = 0;
  int64_t last_rows = 0;
  for (const uint64_t e : sweep_sizes(o)) {
    const int64_t rows = std::max<int64_t>(R, static_cast<int64_t>(e) / kH / R * R);
    if (rows == last_rows) continue;  // rounded to the row just measured
    last_rows = rows;
    const int64_t n = rows * kH;
    const Quantized q = quantize_rows(rank, 0, rows, xt, mx);
    const int64_t out_rows = rs ? rows / R : rows;
    Bytes out(static_cast<size_t>(out_rows * kH) * oes);
    const TensorView xv(q.codes.data(), xt, {rows, kH});
    const TensorView ov(out.data(), ot, {out_rows, kH});
    std::vector<float> ws;
    std::function<void()> fused;
    std::unique_ptr<QuantAllReducePlan> ar;
    std::unique_ptr<QuantReduceScatterPlan> rsp;
    if (rs) {
      rsp = std::make_unique<QuantReduceScatterPlan>(xv, scales_view(q, mx, rows), comm.name(),
                                                     "sum", ov);
      ws.resize(rsp->workspace_size() / 4 + 1);
      fused = [&] { rsp->execute(ws.data(), rsp->workspace_size()); };
    } else {
      ar = std::make_unique<QuantAllReducePlan>(xv, scales_view(q, mx, rows), comm.name(), "sum",
                                                ov);
      ws.resize(ar->workspace_size() / 4 + 1);
      fused = [&] { ar->execute(ws.data(), ar->workspace_size()); };
    }
    const uint64_t nu = static_cast<uint64_t>(n), per = nu / static_cast<uint64_t>(R);
    std::vector<float> f32_src(nu, 1.0f), f32_dst(nu);
    std::vector<uint16_t> bf_src(nu, 0x3F80), bf_dst(nu);
    std::function<void()> mpi, cf_bf16, cf_f32;
    if (rs) {
      mpi = [&] {
        MPI_Reduce_scatter_block(f32_src.data(), f32_dst.data(), static_cast<int>(per), MPI_FLOAT,
                                 MPI_SUM, MPI_COMM_WORLD);
      };
      cf_bf16 = [&] { comm.reduce_scatter(bf_src.data(), bf_dst.data(), per, DType::kBFloat16); };
      cf_f32 = [&] { comm.reduce_scatter(f32_src.data(), f32_dst.data(), per, DType::kFloat32); };
    } else {
      mpi = [&] {
        MPI_Allreduce(f32_src.data(), f32_dst.data(), static_cast<int>(nu), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      };
      cf_bf16 = [&] { comm.all_reduce(bf_src.data(), bf_dst.data(), nu, DType::kBFloat16); };
      cf_f32 = [&] { comm.all_reduce(f32_src.data(), f32_dst.data(), nu, DType::kFloat32); };
    }
    const int iters = o.iters > 0 ? o.iters
                                  : static_cast<int>(std::clamp<int64_t>(
                                        (int64_t{64} << 20) / std::max<int64_t>(n, 1), 3, 500));
    const int warmup = o.warmup + std::min(iters / 10, 20);
    for (int i = 0; i < warmup; ++i)
      for (auto* f : {&fused, &mpi, &cf_bf16, &cf_f32}) (*f)();
    std::vector<double> t_fused, t_mpi, t_bf16, t_f32;
    for (int r = 0; r < o.rounds; ++r) {
      t_fused.push_back(time_us(fused, iters));
      t_mpi.push_back(time_us(mpi, iters));
      t_bf16.push_back(time_us(cf_bf16, iters));
      t_f32.push_back(time_us(cf_f32, iters));
    }

    // Check every row of this rank's output against a float64 sum of every rank's
    // dequantized input (recomputed here, in chunks of rows to bound the memory), within
    // fp32 accumulation + output rounding; outside the timed loop.
    uint64_t wrong = 0;
    {
      const int64_t row0 = rs ? rank * out_rows : 0;
      const double u = unit_roundoff(ot);
      constexpr int64_t kChunk = 256;
      for (int64_t c0 = 0; c0 < out_rows; c0 += kChunk) {
        const int64_t cr = std::min(kChunk, out_rows - c0);
        std::vector<double> sum(static_cast<size_t>(cr * kH), 0.0), mag(sum.size(), 0.0);
        std::vector<float> deq(sum.size());
        for (int r = 0; r < R; ++r) {
          const Quantized qr = quantize_rows(r, row0 + c0, cr, xt, mx);
          dequantize(TensorView(qr.codes.data(), xt, {cr, kH}), scales_view(qr, mx, cr),
                     mx ? "mx" : "per_token_group",
                     TensorView(deq.data(), DType::kFloat32, {cr, kH}));
          for (size_t i = 0; i < sum.size(); ++i) {
            sum[i] += deq[i];
            mag[i] += std::fabs(deq[i]);
          }
        }
        std::vector<float> got(sum.size());
        convert(out.data() + static_cast<size_t>(c0 * kH) * oes, ot, got.data(), DType::kFloat32,
                got.size());
        for (size_t i = 0; i < sum.size(); ++i)
          wrong += !(std::fabs(got[i] - sum[i]) <=
                     R * std::ldexp(1.0, -24) * mag[i] + u * std::fabs(sum[i]) * 1.01 + 1e-30);
      }
    }
    uint64_t total_wrong = 0;
    MPI_Allreduce(&wrong, &total_wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    const double fu = mean_over_ranks(median(t_fused), R);
    const double mu = mean_over_ranks(median(t_mpi), R);
    const double bu = mean_over_ranks(median(t_bf16), R);
    const double su = mean_over_ranks(median(t_f32), R);
    if (rank == 0) {
      const double logical = static_cast<double>(n) * 4;
      const double wire = static_cast<double>(n) * 33 / 32;  // codes + scales (H/32 B per row)
      std::printf(
          "%11lld %12.0f %12.0f %11.1f %9.2f %7llu %11.1f %11.1f %11.1f %8.2f %8.2f %8.2f\n",
          static_cast<long long>(n), logical, wire, fu, logical / fu / 1e3,
          static_cast<unsigned long long>(total_wrong), mu, bu, su, mu / fu, bu / fu, su / fu);
      std::fflush(stdout);
      if (json)
        json->row(
            "{\"op\":\"%s\",\"transport\":\"%s\",\"world_size\":%d,\"dtype\":\"%s\","
            "\"scales\":\"%s\",\"out_dtype\":\"%s\",\"elements\":%lld,"
            "\"logical_bytes\":%.0f,\"wire_bytes\":%.0f,\"fused_us\":%.3f,"
            "\"mpi_fp32_us\":%.3f,\"allreduce_bf16_us\":%.3f,\"allreduce_fp32_us\":%.3f,"
            "\"algbw_gbs\":%.4f,\"wrong\":%llu}\n",
            o.op.c_str(), o.transport.c_str(), R, o.dtype.c_str(), o.scales.c_str(),
            o.out_dtype.c_str(), static_cast<long long>(n), logical, wire, fu, mu, bu, su,
            logical / fu / 1e3, static_cast<unsigned long long>(total_wrong));
    }
    if (total_wrong != 0) rc = 1;
  }
  return rc;
}

}  // namespace commfuse::cli
