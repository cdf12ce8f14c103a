// `commfuse bench all-gather-matmul | matmul-reduce-scatter | matmul-all-reduce`: the fused
// operator against, in the same processes and alternating rounds, the unfused composition
// (commfuse's collective, then the same oneDNN GEMM), the same with OpenMPI's collective,
// and the GEMM alone on the same work. Exposed communication = (fused - gemm) /
// (unfused - gemm): 0 means the collective is completely hidden, 1 means not at all.
// Results are checked outside the timed loop (#wrong; exit 1 when nonzero): sampled rows
// against a float64 reference, every element of the variants against each other, and
// all-gather-matmul's gather_out bitwise.
#include <mpi.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_buffer.hpp"
#include "bench_check.hpp"
#include "bench_gemm.hpp"
#include "bench_json.hpp"
#include "bench_options.hpp"
#include "bench_reference.hpp"
#include "bench_timing.hpp"
#include "core/error.hpp"
#include "kernels/cpu/matmul.hpp"

namespace commfuse::cli {
namespace {

// The values of random_matrix(count, t, seed) before they are rounded to t.
std::vector<float> random_values(size_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(static_cast<int>(x >> 9) % 2001 - 1000) / 1000.0f;
  }
  return v;
}

// A rank's operand: any rank can recompute any rank's (the float64 reference does).
Bytes random_matrix(size_t count, DType t, uint32_t seed) {
  const std::vector<float> v = random_values(count, seed);
  Bytes out(dtype_storage_bytes(t, count));
  convert(v.data(), DType::kFloat32, out.data(), t, count);
  return out;
}

// random_matrix's values as the dtype holds them (rounded to t), in fp32.
std::vector<float> matrix_values(size_t count, DType t, uint32_t seed) {
  const Bytes b = random_matrix(count, t, seed);
  std::vector<float> v(count);
  convert(b.data(), t, v.data(), DType::kFloat32, count);
  return v;
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

int run_fused_bench(const BenchOptions& o, Comm& comm, JsonRows* json) {
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
  // The fused op's gather_out apart from the composition's, so that it can be checked.
  Bytes gathered(o.op == "all-gather-matmul" ? static_cast<size_t>(o.m * k) * es : 0),
      gathered_u(gathered.size()), gathered_mpi(gathered.size());
  // The compositions' fp32 partial and reduced sum in the memory the fused op's partial
  // lives in (its Workspace: 64-byte aligned, huge pages offered), not std::vector's 16-byte
  // aligned 4 KiB pages, so that the comparison times the schedules, not the allocators.
  Workspace partial_mem, reduced_mem;
  if (o.op != "all-gather-matmul") {
    partial_mem.resize(static_cast<size_t>(o.m * n) * sizeof(float));
    reduced_mem.resize(static_cast<size_t>(out_rows * n) * sizeof(float));
  }
  float* const partial = partial_mem.as<float>();
  float* const reduced = reduced_mem.as<float>();
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
  std::string schedule, plan_description;  // the algorithm the fused op's plan chose
  // --gather-output 0: no gather_out (gather_output false takes an absent tensor).
  const TensorView gather_view =
      o.gather_output != 0 ? TensorView(gathered.data(), t, {o.m, k}) : TensorView();
  if (o.op == "all-gather-matmul") {
    AllGatherMatmulOptions opt;
    opt.comm_turn = o.comm_turn;
    opt.packed_x2 = packed.get();
    opt.gather_output = o.gather_output != 0;
    auto plan = std::make_shared<AllGatherMatmulPlan>(TensorView(x1.data(), t, {m, k}), x2v, name,
                                                      R, TensorView(out.data(), t, {o.m, n}),
                                                      gather_view, opt);
    workspace.resize(plan->workspace_size());
    schedule = plan->schedule_name();
    plan_description = plan->description();
    c.fused = [&, plan] { plan->execute(workspace.data(), plan->workspace_size()); };
    c.call = [&, x2v, opt] {
      all_gather_matmul(TensorView(x1.data(), t, {m, k}), x2v, name, R,
                        TensorView(out.data(), t, {o.m, n}), gather_view, opt);
    };
    const BenchGemm gemm(kernels::cpu::dense_matmul_desc(o.m, k, n, t), prepacked_b);
    c.gemm = [&, gemm] { gemm(gathered_u.data(), x2.data(), out_unfused.data()); };
    c.unfused = [&, gemm] {
      comm.all_gather(x1.data(), gathered_u.data(), static_cast<uint64_t>(m * k), t);
      gemm(gathered_u.data(), x2.data(), out_unfused.data());
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
      schedule = plan->schedule_name();
      plan_description = plan->description();
      c.fused = [&, plan] { plan->execute(workspace.data(), plan->workspace_size()); };
      c.call = [&, x1v, x2v, outv, opt] { matmul_reduce_scatter(x1v, x2v, name, R, outv, opt); };
    } else {
      auto plan = std::make_shared<MatmulAllReducePlan>(x1v, x2v, name, outv, opt);
      workspace.resize(plan->workspace_size());
      schedule = plan->schedule_name();
      plan_description = plan->description();
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
      gemm32(x1.data(), x2.data(), partial);
      if (rs)
        comm.reduce_scatter(partial, reduced, reduced_count, DType::kFloat32);
      else
        comm.all_reduce(partial, reduced, reduced_count, DType::kFloat32);
      convert(reduced, DType::kFloat32, out_unfused.data(), t, reduced_count);
    };
    c.unfused_mpi = [&, gemm32, rs, reduced_count] {
      gemm32(x1.data(), x2.data(), partial);
      if (rs)
        MPI_Reduce_scatter_block(partial, reduced, static_cast<int>(reduced_count), MPI_FLOAT,
                                 MPI_SUM, MPI_COMM_WORLD);
      else
        MPI_Allreduce(partial, reduced, static_cast<int>(reduced_count), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      convert(reduced, DType::kFloat32, out_mpi.data(), t, reduced_count);
    };
    c.flops = 2.0 * static_cast<double>(o.m) * k * n;
  }

  // One of each to warm up (plans, pages), and to size the rounds: ~0.3 s of each variant.
  // Checked outside the timed loop, before the one-call function writes the same `out`:
  // the fused output's sampled rows against float64 (fused and unfused share the GEMM
  // kernels, so agreeing with each other alone would not show a wrong kernel), every element
  // of the fused, unfused and OpenMPI variants' outputs against each other, and
  // all-gather-matmul's gather_out bitwise against every rank's x1.
  c.fused();
  c.unfused();
  c.unfused_mpi();
  auto values = [&](size_t count, uint32_t seed) {
    const std::vector<float> v = matrix_values(count, t, seed);
    return std::vector<double>(v.begin(), v.end());
  };
  const Reference ref = float64_reference(
      o.op, unit_roundoff(t), rank, R, o.m, k, n, out_rows,
      [&](int r) { return values(static_cast<size_t>(x1_rows * k), 1 + static_cast<uint32_t>(r)); },
      [&](int r) { return values(static_cast<size_t>(k * n), 100 + static_cast<uint32_t>(r)); });
  const Check vs_ref = check_rows(out, t, n, ref),
              vs_unfused = check_pair(out, out_unfused, t, ref.acc_tol),
              mpi_vs_unfused = check_pair(out_mpi, out_unfused, t, ref.acc_tol);
  uint64_t gather_wrong = 0;
  if (o.op == "all-gather-matmul" && o.gather_output != 0) {
    const size_t block = static_cast<size_t>(m * k) * es;
    for (int r = 0; r < R; ++r) {
      const Bytes want = random_matrix(static_cast<size_t>(m * k), t, 1 + r);
      for (size_t i = 0; i < block; i += es)
        gather_wrong += std::memcmp(gathered.data() + static_cast<size_t>(r) * block + i,
                                    want.data() + i, es) != 0;
    }
  }
  // Each check's wrong elements summed over ranks; max |fused - unfused| (NaN wins) over ranks.
  uint64_t wrong[4] = {vs_ref.wrong, vs_unfused.wrong, mpi_vs_unfused.wrong, gather_wrong},
           all_wrong[4] = {};
  MPI_Allreduce(wrong, all_wrong, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  uint64_t total_wrong = all_wrong[0] + all_wrong[1] + all_wrong[2] + all_wrong[3];
  const double diff = std::isnan(vs_unfused.max_diff) ? INFINITY : vs_unfused.max_diff;
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
  // The variant that starts each round rotates (time_rounds): in a fixed order one variant
  // always followed the same other, whose buffers it found in cache or thrashed.
  const std::vector<std::vector<double>> times =
      time_rounds({&c.fused, &c.unfused, &c.unfused_mpi, &c.gemm, &c.call}, iters, o.rounds);
  enum { kFused, kUnfused, kUnfusedMpi, kGemm, kCall };
  // The timed calls' results too: `out` holds the last timed call's of the fused plan or
  // the one-call function (both write it; the other variants have buffers of their own).
  const uint64_t late_wrong_mine = check_rows(out, t, n, ref).wrong;
  uint64_t late_wrong = 0;
  MPI_Allreduce(&late_wrong_mine, &late_wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  total_wrong += late_wrong;
  const double fused = mean_over_ranks(median(times[kFused]), R),
               unfused = mean_over_ranks(median(times[kUnfused]), R),
               unfused_mpi = mean_over_ranks(median(times[kUnfusedMpi]), R),
               gemm = mean_over_ranks(median(times[kGemm]), R),
               call = mean_over_ranks(median(times[kCall]), R);
  double worst_diff = 0;  // +inf: a NaN difference somewhere (MPI_MAX would not carry NaN)
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
        "# unfused = %s; unfused_mpi = the same with OpenMPI's collective; "
        "gemm = the GEMM alone on the same work\n",
        o.op == "all-gather-matmul"
            ? "commfuse all_gather, then the same oneDNN GEMM"
            : "the same oneDNN GEMM (fp32 partial), then commfuse's fp32 reduce collective");
    // Which algorithm the fused op ran: where its list chose "unfused", the fused column
    // times the library's own composition, not fusion.
    std::printf("# fused op's schedule: %s (%s)\n", schedule.c_str(), plan_description.c_str());
    if (o.gather_output == 0)
      std::printf("# --gather-output 0: the op returns no gather_out (gather_output false)\n");
    if (packed)
      std::printf("# --packed-x2 1: every variant's x2 packed once, before the timed calls: %s\n",
                  packed->description().c_str());
    std::printf("%12s %12s %14s %12s %9s %10s %10s %9s %12s %7s\n", "fused(us)", "unfused(us)",
                "unfused_mpi(us)", "gemm(us)", "TFLOP/s", "speedup", "vs_mpi", "fused/gemm",
                "exposed_comm", "#wrong");
    std::printf("%12.1f %12.1f %14.1f %12.1f %9.3f %9.2fx %9.2fx %9.3f %12.2f %7llu\n", fused,
                unfused, unfused_mpi, gemm, c.flops / fused / 1e6, unfused / fused,
                unfused_mpi / fused, fused / gemm, exposed,
                static_cast<unsigned long long>(total_wrong));
    const std::string gather_check = o.op != "all-gather-matmul" ? ""
                                     : o.gather_output != 0
                                         ? std::to_string(all_wrong[3]) + " gather_out elements, "
                                         : "no gather_out (--gather-output 0), ";
    std::printf(
        "# max |fused - unfused| = %.3g (oneDNN's fp32 summation order may differ by "
        "block shape; inf: a NaN)\n"
        "# #wrong (all ranks): %llu of %zu sampled rows' elements vs float64, %llu fused vs "
        "unfused, %llu OpenMPI variant vs unfused, %s%llu sampled "
        "elements of the last timed call's output vs float64\n",
        worst_diff, static_cast<unsigned long long>(all_wrong[0]), ref.rows.size() * n * R,
        static_cast<unsigned long long>(all_wrong[1]),
        static_cast<unsigned long long>(all_wrong[2]), gather_check.c_str(),
        static_cast<unsigned long long>(late_wrong));
    std::printf("# the one-call C++ function (plan + workspace + execute each call): %.1f us\n\n",
                call);
    if (json)
      json->row(
          "{\"op\":\"%s\",\"transport\":\"%s\",\"world_size\":%d,\"dtype\":\"%s\","
          "\"m\":%lld,\"k\":%lld,\"n\":%lld,\"comm_turn\":%lld,\"gather_output\":%s,"
          "\"fused_us\":%.3f,"
          "\"unfused_us\":%.3f,\"unfused_mpi_us\":%.3f,\"gemm_alone_us\":%.3f,"
          "\"call_us\":%.3f,\"tflops\":%.4f,\"exposed_comm\":%s,\"max_diff\":%s,"
          "\"wrong\":%llu,\"schedule\":\"%s\"}\n",
          o.op.c_str(), comm.transport_name(), R, o.dtype.c_str(), static_cast<long long>(o.m),
          static_cast<long long>(o.k), static_cast<long long>(o.n),
          static_cast<long long>(o.comm_turn),
          // null: the reducing ops have no gather_out
          o.op != "all-gather-matmul" ? "null"
          : o.gather_output != 0      ? "1"
                                      : "0",
          fused, unfused, unfused_mpi, gemm, call, c.flops / fused / 1e6,
          std::isfinite(exposed) ? std::to_string(exposed).c_str() : "null",
          json_number(worst_diff).c_str(), static_cast<unsigned long long>(total_wrong),
          schedule.c_str());
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace commfuse::cli
