// `commfuse bench alltoall-quant-matmul|alltoall-matmul`: the fused operator against, in
// the same processes and run,
//   (a) the unfused quantized pipeline: the op's `unfused` algorithm, forced
//       (src/ops/alltoall_quant_matmul/schedule_unfused.cpp): all_to_all into a receive
//       buffer, a separate permute pass, a separate quantize pass, the same int GEMM, a
//       separate dequant pass;
//   (b) the unquantized path: all_to_all + permute + one bf16/fp16 GEMM (oneDNN);
//   (c) plain MPI + oneDNN: path (b) with OpenMPI's MPI_Alltoall (over the transport the
//       run's OpenMPI uses: shared memory, or TCP with --transport mpi) for commfuse's.
// Rounds alternate the four; the median per variant is reported (mean over ranks).
// #wrong counts output elements where the fused op and pipeline (a) differ (they compute the
// same quantization and the same integer GEMM, so they must agree bit for bit), where the
// fused op's sampled rows leave a float64 reference computed from the bench's own inputs
// (alltoall_quant_matmul: by more than the dynamic quantization's error bound), and
// (alltoall-matmul) where the fused op and path (b) differ by more than fp32 accumulation
// and output rounding allow; and where (c) and (b) differ at all (the same GEMM on the same
// bytes).
#include <mpi.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algo_scope.hpp"
#include "bench_buffer.hpp"
#include "bench_check.hpp"
#include "bench_gemm.hpp"
#include "bench_options.hpp"
#include "bench_timing.hpp"
#include "core/error.hpp"
#include "kernels/cpu/matmul.hpp"

namespace commfuse::cli {
namespace {

namespace cpu = kernels::cpu;

uint32_t hash(uint64_t i) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x94D049BB133111EBull;
  z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(z >> 32);
}

// Rank `rank`'s x1 values (bs, h) as the bench builds them, as its dtype holds them.
std::vector<float> x1_values(int rank, int64_t bs, int64_t h, bool a4w4, DType x1t) {
  std::vector<float> xf(static_cast<size_t>(bs * h));
  for (size_t i = 0; i < xf.size(); ++i)
    xf[i] = a4w4 ? static_cast<float>(static_cast<int>(hash(i + rank * 7777) % 16) - 8)
                 : (static_cast<float>(hash(i + rank * 7777) % 2001) - 1000.0f) / 500.0f;
  Bytes b(dtype_storage_bytes(x1t, xf.size()));
  convert(xf.data(), DType::kFloat32, b.data(), x1t, xf.size());
  convert(b.data(), x1t, xf.data(), DType::kFloat32, xf.size());
  return xf;
}

// The fused op's sampled output rows against float64 from the bench's inputs: row i of rank
// `me` is sum_s x1_s[me * rows + i, :] (rank s's row, H columns) times x2's rows s*H.., the
// all-to-all's permute. Quantized: times the token scale (A4W4) and x2's scale, with the
// dynamic per-token quantization of A16 to [-qmax, qmax] (127 A16W8, 7 A16W4: |error| <=
// amax / (2 qmax) per element, taken as amax / qmax over the whole row) in the tolerance; plus
// output rounding and fp32 accumulation (k 2^-24 sum |a b|), twice over for slack. acc_tol: the
// largest accumulation part, for check_pair.
Check check_reference(const Bytes& out, DType out_t, int me, int R, int64_t bs, int64_t h,
                      int64_t n, const std::vector<int8_t>& w, bool quant, bool a4w4, bool w4,
                      DType x1t, float token_scale, float x2_scale, double* acc_tol) {
  const int64_t rows = bs / R, k = h * R;
  std::vector<std::vector<float>> x1(static_cast<size_t>(R));
  for (int s = 0; s < R; ++s) x1[static_cast<size_t>(s)] = x1_values(s, bs, h, a4w4, x1t);
  const std::vector<float> got = as_float(out, out_t);
  const double u = unit_roundoff(out_t), scale = quant ? double(x2_scale) : 1.0;
  Check c;
  *acc_tol = 0;
  for (int64_t i : sample_rows(rows, 0, R)) {
    std::vector<double> sum(static_cast<size_t>(n), 0.0), mag(sum.size(), 0.0),
        wabs(sum.size(), 0.0);
    double amax = 0;
    for (int s = 0; s < R; ++s)
      for (int64_t col = 0; col < h; ++col) {
        double a = x1[static_cast<size_t>(s)][static_cast<size_t>((me * rows + i) * h + col)];
        if (a4w4) a *= token_scale;
        amax = std::max(amax, std::fabs(a));
        const int8_t* wr = &w[static_cast<size_t>((s * h + col) * n)];
        for (int64_t j = 0; j < n; ++j) {
          const double p = a * wr[j] * scale;
          sum[static_cast<size_t>(j)] += p;
          mag[static_cast<size_t>(j)] += std::fabs(p);
          wabs[static_cast<size_t>(j)] += std::abs(wr[j]) * scale;
        }
      }
    const double qerr = quant && !a4w4 ? amax / (w4 ? 7 : 127) : 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const size_t e = static_cast<size_t>(j);
      const double acc = 2 * static_cast<double>(k) * std::ldexp(1.0, -24) * mag[e];
      *acc_tol = std::max(*acc_tol, acc);
      c.add(std::fabs(got[static_cast<size_t>(i * n + j)] - sum[e]),
            2 * u * std::fabs(sum[e]) + acc + wabs[e] * qerr);
    }
  }
  return c;
}

}  // namespace

int bench_alltoall(const BenchOptions& o, Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  const bool quant = o.op == "alltoall-quant-matmul";
  const DType t = dtype_from_name(o.dtype);
  CF_CHECK_ARG(o.bs % R == 0, "bench: --bs ", o.bs, " must be a multiple of -n ", R);
  CF_CHECK_ARG(!quant || o.combo != "a4w4" || o.h % 2 == 0, "bench: a4w4 needs an even --h");
  const int64_t rows = o.bs / R, h = o.h, k = h * R, n = o.n;
  const bool a4w4 = quant && o.combo == "a4w4", w4 = quant && o.combo != "a16w8";
  // Activations in x1's dtype (a4w4: int4 plus fp32 token scales), weights int8/int4 and,
  // for path (b), the same weights in x1's dtype (a4w4: bfloat16).
  const DType half = a4w4 ? DType::kBFloat16 : t;
  const DType x1t = a4w4 ? DType::kInt4 : t;
  std::vector<float> xf(static_cast<size_t>(o.bs * h));
  for (size_t i = 0; i < xf.size(); ++i)
    xf[i] = a4w4 ? static_cast<float>(static_cast<int>(hash(i + me * 7777) % 16) - 8)
                 : (static_cast<float>(hash(i + me * 7777) % 2001) - 1000.0f) / 500.0f;
  Bytes x1(dtype_storage_bytes(x1t, xf.size()));
  convert(xf.data(), DType::kFloat32, x1.data(), x1t, xf.size());
  std::vector<float> token(static_cast<size_t>(o.bs), 0.01f);
  std::vector<int8_t> w(static_cast<size_t>(k * n));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<int8_t>(w4 ? static_cast<int>(hash(i + 3) % 16) - 8
                                  : static_cast<int>(hash(i + 3) % 255) - 127);
  Bytes x2q(dtype_storage_bytes(w4 ? DType::kInt4 : DType::kInt8, w.size()));
  if (w4)
    pack_int4(w.data(), x2q.data(), w.size());
  else
    std::memcpy(x2q.data(), w.data(), w.size());
  std::vector<float> wf(w.begin(), w.end());
  Bytes x2h(dtype_storage_bytes(half, wf.size()));
  convert(wf.data(), DType::kFloat32, x2h.data(), half, wf.size());
  std::vector<float> x2_scale(static_cast<size_t>(n), 0.001f);
  const size_t hes = dtype_storage_bytes(half, 1);
  Bytes out_fused(static_cast<size_t>(rows * n) * hes), out_unfused(out_fused.size()),
      out_half(out_fused.size());

  // The fused operator and (a), the same op with its unfused algorithm.
  std::function<void()> fused, unfused;
  std::unique_ptr<AlltoAllQuantMatmulPlan> qplan, uplan;
  std::unique_ptr<AlltoAllMatmulPlan> mplan;
  std::vector<float> ws, uws;
  // --packed-x2 1: x2 prepared once ahead for the op (A16W8 / A16W4: the int8 / int4 x2, for
  // the fused op and its unfused algorithm; alltoall-matmul: the 16-bit x2), and path (b)'s
  // 16-bit x2 packed once too (BenchGemm).
  std::optional<PackedWeight> packed;
  if (o.packed_x2 != 0)
    packed.emplace(quant ? TensorView(x2q.data(), w4 ? DType::kInt4 : DType::kInt8, {k, n})
                         : TensorView(x2h.data(), t, {k, n}),
                   rows);
  if (quant) {
    AlltoAllQuantMatmulOptions qo;
    qo.packed_x2 = packed ? &*packed : nullptr;
    qo.x1_quant_mode = a4w4 ? 3 : 7;
    if (a4w4) qo.x1_scale = TensorView(token.data(), DType::kFloat32, {o.bs});
    auto make = [&](Bytes& out) {
      return std::make_unique<AlltoAllQuantMatmulPlan>(
          TensorView(x1.data(), x1t, {o.bs, h}),
          TensorView(x2q.data(), w4 ? DType::kInt4 : DType::kInt8, {k, n}),
          TensorView(x2_scale.data(), DType::kFloat32, {n}), comm.name(),
          TensorView(out.data(), half, {rows, n}), TensorView(), qo);
    };
    qplan = with_algorithm("alltoall_quant_matmul:fused", [&] { return make(out_fused); });
    uplan = with_algorithm("alltoall_quant_matmul:unfused", [&] { return make(out_unfused); });
    ws.resize(qplan->workspace_size() / sizeof(float) + 1);
    uws.resize(uplan->workspace_size() / sizeof(float) + 1);
    fused = [&] { qplan->execute(ws.data(), qplan->workspace_size()); };
    unfused = [&] { uplan->execute(uws.data(), uplan->workspace_size()); };
  } else {
    AlltoAllMatmulOptions mo;
    mo.packed_x2 = packed ? &*packed : nullptr;
    mplan = with_algorithm("alltoall_matmul:fused", [&] {
      return std::make_unique<AlltoAllMatmulPlan>(
          TensorView(x1.data(), t, {o.bs, h}), TensorView(x2h.data(), t, {k, n}), comm.name(),
          TensorView(out_fused.data(), t, {rows, n}), TensorView(), mo);
    });
    ws.resize(mplan->workspace_size() / sizeof(float) + 1);
    fused = [&] { mplan->execute(ws.data(), mplan->workspace_size()); };
  }

  Bytes recv(x1.size()), perm(x1.size());
  const size_t row_bytes = static_cast<size_t>(h) * hes;
  // recv (rank s's rows for this rank, s-major) to perm (token-major: row i's R pieces).
  auto permute = [&] {
    for (int64_t i = 0; i < rows; ++i)
      for (int s = 0; s < R; ++s)
        std::memcpy(perm.data() + (static_cast<size_t>(i) * R + s) * row_bytes,
                    recv.data() + (static_cast<size_t>(s) * rows + i) * row_bytes, row_bytes);
  };
  // (b) the unquantized path, and (c) the same with OpenMPI's all-to-all. MPI counts are ints:
  // past them (c) is left out (n/a).
  std::function<void()> half_path, mpi_path;
  Bytes out_mpi(out_fused.size());
  if (!a4w4) {
    const BenchGemm gemm(cpu::dense_matmul_desc(rows, k, n, t),
                         o.packed_x2 != 0 ? x2h.data() : nullptr);
    half_path = [&, gemm] {
      comm.all_to_all(x1.data(), recv.data(), static_cast<size_t>(rows * h), t);
      permute();
      gemm(perm.data(), x2h.data(), out_half.data());
    };
    const uint64_t block_bytes = static_cast<uint64_t>(rows) * row_bytes;
    if (block_bytes <= static_cast<uint64_t>(INT_MAX))
      mpi_path = [&, gemm, block = static_cast<int>(block_bytes)] {
        MPI_Alltoall(x1.data(), block, MPI_BYTE, recv.data(), block, MPI_BYTE, MPI_COMM_WORLD);
        permute();
        gemm(perm.data(), x2h.data(), out_mpi.data());
      };
  }

  const int iters = std::max(1, o.iters);
  for (int i = 0; i < std::max(1, o.warmup); ++i) {
    fused();
    if (unfused) unfused();
    if (half_path) half_path();
    if (mpi_path) mpi_path();
  }
  const auto times = time_rounds({&fused, &unfused, &half_path, &mpi_path}, iters, o.rounds);
  const std::vector<double>&tf = times[0], &tu = times[1], &th = times[2], &tm = times[3];
  // The last timed call's outputs, checked outside the timed loop.
  uint64_t wrong = 0, total_wrong = 0;
  if (unfused) wrong += differing_elements(out_fused, out_unfused, hes);
  double acc_tol = 0;
  wrong += check_reference(out_fused, half, me, R, o.bs, h, n, w, quant, a4w4, w4, x1t, token[0],
                           x2_scale[0], &acc_tol)
               .wrong;
  // alltoall-matmul computes what path (b) does (the same bf16/fp16 GEMM but for its
  // blocking): every element within accumulation and rounding of it.
  if (!quant && half_path) wrong += check_pair(out_fused, out_half, half, acc_tol).wrong;
  // (c) is (b) with another all-to-all: the same bytes, so the same result bit for bit.
  if (mpi_path) wrong += differing_elements(out_mpi, out_half, hes);
  MPI_Allreduce(&wrong, &total_wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  const double f_us = mean_over_ranks(median(tf), R);
  const double u_us = unfused ? mean_over_ranks(median(tu), R) : 0;
  const double h_us = half_path ? mean_over_ranks(median(th), R) : 0;
  const double m_us = mpi_path ? mean_over_ranks(median(tm), R) : 0;
  if (me == 0) {
    const std::string combo = quant ? o.combo : std::string("-");
    const std::string sched = quant ? qplan->schedule_name() : mplan->schedule_name();
    std::printf("# commfuse bench %s: %d ranks, transport %s, median of %d rounds x %d iters\n",
                o.op.c_str(), R, comm.transport_name(), o.rounds, iters);
    std::printf("# fused schedule: %s\n", sched.c_str());
    if (packed)
      std::printf("# --packed-x2 1: x2 prepared once, before the timed calls: %s\n",
                  packed->description().c_str());
    if (uplan)
      std::printf(
          "# unfused_quant: %s: all_to_all, permute, quantize, int GEMM, dequant (separate "
          "passes)\n",
          uplan->schedule_name());
    std::printf("# %s_path: all_to_all, permute, %s GEMM (oneDNN)\n",
                std::string(dtype_name(half)).c_str(), std::string(dtype_name(half)).c_str());
    std::printf("# mpi_path: the same with OpenMPI's MPI_Alltoall (plain MPI + oneDNN)\n");
    std::printf("%6s %6s %6s %6s %9s %14s %18s %15s %14s %9s %11s %11s %9s %7s\n", "BS", "H", "N",
                "combo", "dtype", "fused(us)", "unfused_quant(us)", "half_path(us)", "mpi_path(us)",
                "TFLOP/s", "x_unfused", "x_half", "x_mpi", "#wrong");
    const double flops = 2.0 * static_cast<double>(rows) * k * n;
    auto fmt = [](const char* f, double v) {
      char b[32];
      std::snprintf(b, sizeof(b), f, v);
      return std::string(b);
    };
    auto cell = [&](double v) { return v > 0 ? fmt("%.0f", v) : std::string("n/a"); };
    auto ratio = [&](double a, double b) {
      return a > 0 ? fmt("%.2f", a / b) : std::string("n/a");
    };
    std::printf("%6lld %6lld %6lld %6s %9s %14.0f %18s %15s %14s %9.3f %11s %11s %9s %7llu\n",
                static_cast<long long>(o.bs), static_cast<long long>(h), static_cast<long long>(n),
                combo.c_str(), o.dtype.c_str(), f_us, cell(u_us).c_str(), cell(h_us).c_str(),
                cell(m_us).c_str(), flops / f_us / 1e6, ratio(u_us, f_us).c_str(),
                ratio(h_us, f_us).c_str(), ratio(m_us, f_us).c_str(),
                static_cast<unsigned long long>(total_wrong));
    if (!o.json.empty()) {
      FILE* json = std::fopen(o.json.c_str(), "w");
      CF_CHECK_ARG(json != nullptr, "bench: cannot write --json file ", o.json);
      std::fprintf(json,
                   "{\"op\":\"%s\",\"transport\":\"%s\",\"world_size\":%d,\"bs\":%lld,\"h\":%lld,"
                   "\"n\":%lld,\"combo\":\"%s\",\"dtype\":\"%s\",\"fused_us\":%.1f,"
                   "\"unfused_quant_us\":%s,\"half_path_us\":%s,\"half_path_dtype\":\"%s\","
                   "\"mpi_path_us\":%s,\"tflops\":%.4f,\"wrong\":%llu}\n",
                   o.op.c_str(), o.transport.c_str(), R, static_cast<long long>(o.bs),
                   static_cast<long long>(h), static_cast<long long>(n), combo.c_str(),
                   o.dtype.c_str(), f_us, u_us > 0 ? std::to_string(u_us).c_str() : "null",
                   h_us > 0 ? std::to_string(h_us).c_str() : "null",
                   std::string(dtype_name(half)).c_str(),
                   m_us > 0 ? std::to_string(m_us).c_str() : "null", flops / f_us / 1e6,
                   static_cast<unsigned long long>(total_wrong));
      std::fclose(json);
    }
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace commfuse::cli
