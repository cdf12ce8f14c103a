// `commfuse bench all-gather-matmul | matmul-reduce-scatter | matmul-all-reduce`: the fused
// operator against, in the same processes and alternating rounds, the unfused composition
// (commfuse's collective, then the same oneDNN GEMM), the same with OpenMPI's collective,
// and the GEMM alone on the same work. Exposed communication = (fused - gemm) /
// (unfused - gemm): 0 means the collective is completely hidden, 1 means not at all.
#include <mpi.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_buffer.hpp"
#include "bench_gemm.hpp"
#include "bench_options.hpp"
#include "bench_timing.hpp"
#include "core/error.hpp"
#include "kernels/cpu/matmul.hpp"

namespace commfuse::cli {
namespace {

Bytes random_matrix(size_t count, DType t, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(static_cast<int>(x >> 9) % 2001 - 1000) / 1000.0f;
  }
  Bytes out(dtype_storage_bytes(t, count));
  convert(v.data(), DType::kFloat32, out.data(), t, count);
  return out;
}

// Largest |a - b| over two matrices of dtype t (the fused and unfused outputs).
double max_diff(const Bytes& a, const Bytes& b, DType t) {
  const size_t count = a.size() / dtype_storage_bytes(t, 1);
  std::vector<float> fa(count), fb(count);
  convert(a.data(), t, fa.data(), DType::kFloat32, count);
  convert(b.data(), t, fb.data(), DType::kFloat32, count);
  double d = 0;
  for (size_t i = 0; i < count; ++i) d = std::max(d, std::fabs(double(fa[i]) - double(fb[i])));
  return d;
}

struct Case {
  std::function<void()> fused, unfused, unfused_mpi, gemm;
  // The C++ API's one-call function (plan, workspace and execute in every call), the
  // Python wrapper's baseline; the other variants execute a plan made once.
  std::function<void()> call;
  double flops = 0;  // per rank
  std::string shapes;
  const Bytes* fused_out = nullptr;
  const Bytes* unfused_out = nullptr;
};

}  // namespace

int run_fused_bench(const BenchOptions& o, Comm& comm, FILE* json) {
  const int R = comm.world_size(), rank = comm.rank();
  const DType t = dtype_from_name(o.dtype);
  if (t == DType::kInt8 || t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2 ||
      t == DType::kHiFloat8) {
    return run_quant_matmul_bench(o, comm, json);
  }
  CF_CHECK_ARG(t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16,
               "bench: --dtype for the matmul ops is float32, float16 or bfloat16");
  const size_t es = dtype_storage_bytes(t, 1);
  const int64_t m = o.m / R;  // rows per rank (all-gather-matmul); output rows (reduce-scatter)
  const int64_t k = o.op == "all-gather-matmul" ? o.k : o.k / R;  // this rank's x1 columns
  const int64_t n = o.n;
  const std::string name = comm.name();

  // Buffers live for the whole run; each variant writes its own output.
  const int64_t x1_rows = o.op == "all-gather-matmul" ? m : o.m;
  auto x1 = random_matrix(static_cast<size_t>(x1_rows * k), t, 1 + rank);
  auto x2 = random_matrix(static_cast<size_t>(k * n), t, 100 + rank);
  const int64_t out_rows = o.op == "all-gather-matmul"       ? o.m
                           : o.op == "matmul-reduce-scatter" ? m
                                                             : o.m;
  Bytes out(static_cast<size_t>(out_rows * n) * es), out_unfused(out.size()), out_mpi(out.size());
  Bytes gathered(o.op == "all-gather-matmul" ? static_cast<size_t>(o.m * k) * es : 0),
      gathered_mpi(gathered.size());
  std::vector<float> partial(o.op == "all-gather-matmul" ? 0 : static_cast<size_t>(o.m * n)),
      reduced(static_cast<size_t>(out_rows * n));
  const TensorView x2v(x2.data(), t, {k, n});
  Case c;
  c.fused_out = &out;
  c.unfused_out = &out_unfused;

  // --packed-x2 1: x2 packed once for the op (PackedWeight, the op's GEMM rows as the
  // hint), and the composition's GEMMs read a copy packed once too (BenchGemm).
  const std::shared_ptr<const PackedWeight> packed =
      o.packed_x2 != 0 ? std::make_shared<const PackedWeight>(x2v, o.m) : nullptr;
  const void* prepacked_b = packed ? x2.data() : nullptr;
  Workspace workspace;
  Bytes gemm_out;
  if (o.op == "all-gather-matmul") {
    AllGatherMatmulOptions opt;
    opt.comm_turn = o.comm_turn;
    opt.packed_x2 = packed.get();
    auto plan = std::make_shared<AllGatherMatmulPlan>(
        TensorView(x1.data(), t, {m, k}), x2v, name, R, TensorView(out.data(), t, {o.m, n}),
        TensorView(gathered.data(), t, {o.m, k}), opt);
    workspace.resize(plan->workspace_size());
    c.fused = [&, plan] { plan->execute(workspace.data(), plan->workspace_size()); };
    c.call = [&, x2v, opt] {
      all_gather_matmul(TensorView(x1.data(), t, {m, k}), x2v, name, R,
                        TensorView(out.data(), t, {o.m, n}),
                        TensorView(gathered.data(), t, {o.m, k}), opt);
    };
    const BenchGemm gemm(kernels::cpu::dense_matmul_desc(o.m, k, n, t), prepacked_b);
    c.gemm = [&, gemm] { gemm(gathered.data(), x2.data(), out_unfused.data()); };
    c.unfused = [&, gemm] {
      comm.all_gather(x1.data(), gathered.data(), static_cast<uint64_t>(m * k), t);
      gemm(gathered.data(), x2.data(), out_unfused.data());
    };
    c.unfused_mpi = [&, gemm] {
      MPI_Allgather(x1.data(), static_cast<int>(m * k * es), MPI_BYTE, gathered_mpi.data(),
                    static_cast<int>(m * k * es), MPI_BYTE, MPI_COMM_WORLD);
      gemm(gathered_mpi.data(), x2.data(), out_mpi.data());
    };
    c.flops = 2.0 * static_cast<double>(o.m) * k * n;
  } else {
    MatmulReduceOptions opt;
    opt.comm_turn = o.comm_turn;
    opt.packed_x2 = packed.get();
    const bool rs = o.op == "matmul-reduce-scatter";
    const TensorView x1v(x1.data(), t, {o.m, k});
    const TensorView outv(out.data(), t, {out_rows, n});
    std::function<void()> exec;
    if (rs) {
      auto plan = std::make_shared<MatmulReduceScatterPlan>(x1v, x2v, name, R, outv, opt);
      workspace.resize(plan->workspace_size());
      c.fused = [&, plan] { plan->execute(workspace.data(), plan->workspace_size()); };
      c.call = [&, x1v, x2v, outv, opt] { matmul_reduce_scatter(x1v, x2v, name, R, outv, opt); };
    } else {
      auto plan = std::make_shared<MatmulAllReducePlan>(x1v, x2v, name, outv, opt);
      workspace.resize(plan->workspace_size());
      c.fused = [&, plan] { plan->execute(workspace.data(), plan->workspace_size()); };
      c.call = [&, x1v, x2v, outv, opt] { matmul_all_reduce(x1v, x2v, name, outv, opt); };
    }
    auto pd = kernels::cpu::dense_matmul_desc(o.m, k, n, t);
    pd.c_dtype = DType::kFloat32;
    const BenchGemm gemm32(pd, prepacked_b);
    const BenchGemm gemm(kernels::cpu::dense_matmul_desc(o.m, k, n, t), prepacked_b);
    const auto reduced_count = static_cast<uint64_t>(out_rows * n);
    // The GEMM alone writes all o.m rows (the reduce-scatter output has only m of them).
    gemm_out.resize(static_cast<size_t>(o.m * n) * es);
    c.gemm = [&, gemm] { gemm(x1.data(), x2.data(), gemm_out.data()); };
    c.unfused = [&, gemm32, rs, reduced_count] {
      gemm32(x1.data(), x2.data(), partial.data());
      if (rs)
        comm.reduce_scatter(partial.data(), reduced.data(), reduced_count, DType::kFloat32);
      else
        comm.all_reduce(partial.data(), reduced.data(), reduced_count, DType::kFloat32);
      convert(reduced.data(), DType::kFloat32, out_unfused.data(), t, reduced_count);
    };
    c.unfused_mpi = [&, gemm32, rs, reduced_count] {
      gemm32(x1.data(), x2.data(), partial.data());
      if (rs)
        MPI_Reduce_scatter_block(partial.data(), reduced.data(), static_cast<int>(reduced_count),
                                 MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else
        MPI_Allreduce(partial.data(), reduced.data(), static_cast<int>(reduced_count), MPI_FLOAT,
                      MPI_SUM, MPI_COMM_WORLD);
      convert(reduced.data(), DType::kFloat32, out_mpi.data(), t, reduced_count);
    };
    c.flops = 2.0 * static_cast<double>(o.m) * k * n;
  }

  // One of each to warm up (plans, pages), and to size the rounds: ~0.3 s of each variant.
  c.fused();
  c.unfused();
  const double diff = max_diff(out, out_unfused, t);
  c.unfused_mpi();
  c.call();
  // The slowest variant sizes the rounds (the GEMM alone is the fastest; at the tiny shape
  // it is a fraction of a call that also communicates).
  const double est = std::max({time_us(c.fused, 1), time_us(c.unfused, 1),
                               time_us(c.unfused_mpi, 1), time_us(c.gemm, 1), time_us(c.call, 1)});
  // Not capped low: a tiny op (~10 us) needs thousands of calls for a round long enough that
  // one preemption of the process does not move its mean (200 calls, 2 ms, did).
  int iters =
      o.iters > 0 ? o.iters : std::clamp(static_cast<int>(3e5 / std::max(est, 1.0)), 1, 100000);
  // Every rank must run the same number of iterations (they are collective): rank 0 decides.
  MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<double> ft, ut, mt, gt, ct;
  for (int r = 0; r < o.rounds; ++r) {
    ft.push_back(warm_time_us(c.fused, iters));
    ut.push_back(warm_time_us(c.unfused, iters));
    mt.push_back(warm_time_us(c.unfused_mpi, iters));
    gt.push_back(warm_time_us(c.gemm, iters));
    ct.push_back(warm_time_us(c.call, iters));
  }
  const double fused = mean_over_ranks(median(ft), R), unfused = mean_over_ranks(median(ut), R),
               unfused_mpi = mean_over_ranks(median(mt), R), gemm = mean_over_ranks(median(gt), R),
               call = mean_over_ranks(median(ct), R);
  double worst_diff = 0;
  MPI_Allreduce(&diff, &worst_diff, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double exposed = unfused > gemm ? (fused - gemm) / (unfused - gemm) : NAN;
  if (rank == 0) {
    std::printf(
        "# commfuse bench %s: %d ranks, transport %s, dtype %s, m=%lld (global) k=%lld "
        "n=%lld comm_turn %lld; per-rank GEMM %lldx%lldx%lld; median of %d rounds x %d\n",
        o.op.c_str(), R, comm.transport_name(), o.dtype.c_str(), static_cast<long long>(o.m),
        static_cast<long long>(o.k), static_cast<long long>(o.n),
        static_cast<long long>(o.comm_turn),
        static_cast<long long>(o.op == "all-gather-matmul" ? o.m : o.m), static_cast<long long>(k),
        static_cast<long long>(n), o.rounds, iters);
    std::printf(
        "# unfused = commfuse %s then the same oneDNN GEMM; unfused_mpi = OpenMPI's; "
        "gemm = the GEMM alone on the same work\n",
        o.op == "all-gather-matmul" ? "all_gather" : "reduce collective (fp32)");
    if (packed)
      std::printf("# --packed-x2 1: every variant's x2 packed once, before the timed calls: %s\n",
                  packed->description().c_str());
    std::printf("%12s %12s %14s %12s %9s %10s %10s %9s %12s\n", "fused(us)", "unfused(us)",
                "unfused_mpi(us)", "gemm(us)", "TFLOP/s", "speedup", "vs_mpi", "fused/gemm",
                "exposed_comm");
    std::printf("%12.1f %12.1f %14.1f %12.1f %9.3f %9.2fx %9.2fx %9.3f %12.2f\n", fused, unfused,
                unfused_mpi, gemm, c.flops / fused / 1e6, unfused / fused, unfused_mpi / fused,
                fused / gemm, exposed);
    std::printf(
        "# max |fused - unfused| = %.3g (oneDNN's fp32 summation order may differ by "
        "block shape)\n",
        worst_diff);
    std::printf("# the one-call C++ function (plan + workspace + execute each call): %.1f us\n\n",
                call);
    if (json)
      std::fprintf(json,
                   "{\"op\":\"%s\",\"transport\":\"%s\",\"world_size\":%d,\"dtype\":\"%s\","
                   "\"m\":%lld,\"k\":%lld,\"n\":%lld,\"comm_turn\":%lld,\"fused_us\":%.3f,"
                   "\"unfused_us\":%.3f,\"unfused_mpi_us\":%.3f,\"gemm_alone_us\":%.3f,"
                   "\"call_us\":%.3f,\"tflops\":%.4f,\"exposed_comm\":%s,\"max_diff\":%.6g}\n",
                   o.op.c_str(), comm.transport_name(), R, o.dtype.c_str(),
                   static_cast<long long>(o.m), static_cast<long long>(o.k),
                   static_cast<long long>(o.n), static_cast<long long>(o.comm_turn), fused, unfused,
                   unfused_mpi, gemm, call, c.flops / fused / 1e6,
                   std::isfinite(exposed) ? std::to_string(exposed).c_str() : "null", worst_diff);
  }
  return 0;
}

}  // namespace commfuse::cli
