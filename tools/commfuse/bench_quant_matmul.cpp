// `commfuse bench all-gather-matmul|matmul-reduce-scatter|matmul-all-reduce --dtype
// int8|float8_e4m3fn|float8_e5m2|hifloat8` (SPEC §6): in the same processes and alternating
// rounds, the quantized op (its algorithm list's choice), its unfused algorithm forced
// (all_gather_matmul: the row scales and the codes all-gathered, then the same quantized
// GEMM; the reducing ops: the dequantized partial, then the fp32 collective), and the bf16 op
// at the same shape (the list's choice and unfused). The ratios say what fusion gains on
// quantized data and what quantization gains over bf16.
// Inputs: random codes with per-token x1 scales and per-channel x2 scales (A8W8), per-tensor
// x1 and per-channel x2 scales (FP8 / HiF8); bf16 output.
#include <mpi.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algo_scope.hpp"
#include "bench_buffer.hpp"
#include "bench_json.hpp"
#include "bench_options.hpp"
#include "bench_reference.hpp"
#include "bench_timing.hpp"
#include "core/error.hpp"

namespace commfuse::cli {
namespace {

// Codes spread over the format's range (int8: all of it; 8-bit floats: values in [-2, 2]).
Bytes random_codes(size_t count, DType t, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = t == DType::kInt8 ? static_cast<float>(static_cast<int>(x >> 24) - 128)
                          : static_cast<float>(static_cast<int>(x >> 9) % 2001 - 1000) / 500.0f;
  }
  Bytes out(dtype_storage_bytes(t, count));
  convert(v.data(), DType::kFloat32, out.data(), t, count);
  return out;
}

// Codes (rows, cols) decoded to float64 and scaled as SPEC §6 dequantizes: row i by
// row_scale[i] (one entry: per tensor), column j by (*col_scale)[j] where given.
std::vector<double> dequantized(const Bytes& codes, DType t, const std::vector<float>& row_scale,
                                int64_t cols, const std::vector<float>* col_scale = nullptr) {
  const size_t count = codes.size() / dtype_storage_bytes(t, 1);
  std::vector<float> f(count);
  convert(codes.data(), t, f.data(), DType::kFloat32, count);
  std::vector<double> v(count);
  const auto c = static_cast<size_t>(cols);
  for (size_t i = 0; i < count; ++i)
    v[i] = double{f[i]} * row_scale[row_scale.size() == 1 ? 0 : i / c] *
           (col_scale ? double{(*col_scale)[i % c]} : 1.0);
  return v;
}

struct Variant {
  const char* name;
  std::function<void()> run;
  std::vector<double> times;
};

// One planned op with what running it needs: its workspace size, the algorithm its list
// chose and its description.
struct Planned {
  std::function<void(void* workspace)> run;
  size_t workspace = 0;
  std::string schedule, description;
};

template <typename Plan>
Planned planned(std::shared_ptr<Plan> p) {
  return {[p](void* w) { p->execute(w, p->workspace_size()); }, p->workspace_size(),
          p->schedule_name(), p->description()};
}

// The benchmark's op on one dtype's operands: x1 (x1_rows, k), x2 (k, n), output
// (out_rows, n) in bf16, gather_out (all-gather-matmul; g null: none) (out_rows, k) in x1's
// dtype.
struct OpShape {
  std::string op;  // all_gather_matmul | matmul_reduce_scatter | matmul_all_reduce
  int64_t x1_rows = 0, k = 0, n = 0, out_rows = 0;
};

Planned plan_op(const OpShape& s, const std::string& group, int R, DType t, void* a, void* b,
                void* c, void* g, const TensorView* s1, const TensorView* s2, int64_t comm_turn,
                const PackedWeight* packed) {
  const TensorView x1(a, t, {s.x1_rows, s.k}), x2(b, t, {s.k, s.n});
  const TensorView out(c, DType::kBFloat16, {s.out_rows, s.n});
  if (s.op == "all_gather_matmul") {
    AllGatherMatmulOptions o;
    o.comm_turn = comm_turn;
    o.packed_x2 = packed;
    if (s1) o.x1_scale = *s1;
    if (s2) o.x2_scale = *s2;
    o.gather_output = g != nullptr;  // --gather-output 0: an absent gather_out
    return planned(std::make_shared<AllGatherMatmulPlan>(
        x1, x2, group, R, out, g ? TensorView(g, t, {s.out_rows, s.k}) : TensorView(), o));
  }
  MatmulReduceOptions o;
  o.comm_turn = comm_turn;
  o.packed_x2 = packed;
  if (s1) o.x1_scale = *s1;
  if (s2) o.x2_scale = *s2;
  if (s.op == "matmul_reduce_scatter")
    return planned(std::make_shared<MatmulReduceScatterPlan>(x1, x2, group, R, out, o));
  return planned(std::make_shared<MatmulAllReducePlan>(x1, x2, group, out, o));
}

}  // namespace

int run_quant_matmul_bench(const BenchOptions& o, Comm& comm, JsonRows* json) {
  const int R = comm.world_size(), rank = comm.rank();
  const DType q = dtype_from_name(o.dtype), bf16 = DType::kBFloat16;
  // The shapes of the float benchmark (bench_fused.cpp): all-gather-matmul gathers o.m rows;
  // the reducing ops' x1 has o.m rows and k / R columns on every rank.
  const bool agm = o.op == "all-gather-matmul";
  OpShape shape;
  shape.op = agm                               ? "all_gather_matmul"
             : o.op == "matmul-reduce-scatter" ? "matmul_reduce_scatter"
                                               : "matmul_all_reduce";
  shape.x1_rows = agm ? o.m / R : o.m;
  shape.k = agm ? o.k : o.k / R;
  shape.n = o.n;
  shape.out_rows = o.op == "matmul-reduce-scatter" ? o.m / R : o.m;
  const int64_t m = shape.x1_rows, k = shape.k, n = shape.n;
  const std::string name = comm.name();
  const auto mk = static_cast<size_t>(m * k), kn = static_cast<size_t>(k * n);
  const auto out_count = static_cast<size_t>(shape.out_rows * n);

  auto x1 = random_codes(mk, q, 1 + rank);
  auto x2 = random_codes(kn, q, 100 + rank);
  // Scales differ by rank, so that the reference sees a row scaled by another rank's x1_scale
  // (SPEC §6: x1_scale rows travel with their x1 rows) or a partial by another's x2_scale.
  auto x1_scales = [&](int r) {
    std::vector<float> v(q == DType::kInt8 ? static_cast<size_t>(m) : 1);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = 1.0f / 128 + static_cast<float>((i + 3 * static_cast<size_t>(r)) % 7) / 1024;
    return v;
  };
  auto x2_scales = [&](int r) {
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t j = 0; j < v.size(); ++j)
      v[j] = 1.0f / 64 + static_cast<float>((j + 2 * static_cast<size_t>(r)) % 5) / 512;
    return v;
  };
  const std::vector<float> s1 = x1_scales(rank), s2 = x2_scales(rank);
  const TensorView s1v(s1.data(), DType::kFloat32, {static_cast<int64_t>(s1.size())});
  const TensorView s2v(s2.data(), DType::kFloat32, {n});
  const size_t gathered_count = agm ? static_cast<size_t>(o.m * k) : 0;
  Bytes out(out_count * 2), out_u(out.size()), gathered(gathered_count),
      gathered_u(gathered.size());
  // The bf16 op at the same shape: the codes' values in bf16 (exact), same x2.
  Bytes x1b(mk * 2), x2b(kn * 2), outb(out.size()), outb_u(out.size()),
      gatheredb(gathered.size() * 2), gatheredb_u(gatheredb.size());
  convert(x1.data(), q, x1b.data(), bf16, mk);
  convert(x2.data(), q, x2b.data(), bf16, kn);

  // --packed-x2 1: both x2s prepared once ahead (PackedWeight), for the GEMM's rows.
  std::optional<PackedWeight> packed_q, packed_b;
  if (o.packed_x2 != 0) {
    packed_q.emplace(TensorView(x2.data(), q, {k, n}), o.m);
    packed_b.emplace(TensorView(x2b.data(), bf16, {k, n}), o.m);
  }
  // The op as the algorithm list chooses it, and its unfused algorithm forced.
  auto make = [&](bool unfused, DType t, void* a, void* b, void* c, void* g, bool quant) {
    auto plan = [&] {
      const std::optional<PackedWeight>& pw = quant ? packed_q : packed_b;
      return plan_op(shape, name, R, t, a, b, c, o.gather_output != 0 ? g : nullptr,
                     quant ? &s1v : nullptr, quant ? &s2v : nullptr, o.comm_turn,
                     pw ? &*pw : nullptr);
    };
    return unfused ? with_algorithm(shape.op + ":unfused", plan) : plan();
  };
  const Planned qf = make(false, q, x1.data(), x2.data(), out.data(), gathered.data(), true);
  const Planned qu = make(true, q, x1.data(), x2.data(), out_u.data(), gathered_u.data(), true);
  const Planned bf =
      make(false, bf16, x1b.data(), x2b.data(), outb.data(), gatheredb.data(), false);
  const Planned bu =
      make(true, bf16, x1b.data(), x2b.data(), outb_u.data(), gatheredb_u.data(), false);
  size_t ws_bytes = 0;
  for (const Planned* p : {&qf, &qu, &bf, &bu}) ws_bytes = std::max(ws_bytes, p->workspace);
  std::vector<float> ws(ws_bytes / sizeof(float) + 1);
  auto exec = [&](const Planned& p) { return [&ws, &p] { p.run(ws.data()); }; };
  std::vector<Variant> v = {{"quant_fused", exec(qf), {}},
                            {"quant_unfused", exec(qu), {}},
                            {"bf16_fused", exec(bf), {}},
                            {"bf16_unfused", exec(bu), {}}};
  for (auto& x : v) x.run();  // warm-up: plans, pages, x2 prepared
  // Checked outside the timed loop: each variant's sampled rows against a float64 reference
  // (the variants share GEMM kernels and collectives, so agreeing with each other alone
  // would not show a wrong kernel), the quantized fused output against its unfused
  // algorithm's element by element, and all-gather-matmul's gather_out bitwise against
  // every rank's x1.
  const Reference qref = float64_reference(
      o.op, unit_roundoff(bf16), rank, R, o.m, k, n, shape.out_rows,
      [&](int r) { return dequantized(random_codes(mk, q, 1 + r), q, x1_scales(r), k); },
      [&](int r) {
        const std::vector<float> s = x2_scales(r);
        return dequantized(random_codes(kn, q, 100 + r), q, {1.0f}, n, &s);
      });
  const Reference bref = float64_reference(
      o.op, unit_roundoff(bf16), rank, R, o.m, k, n, shape.out_rows,
      [&](int r) { return dequantized(random_codes(mk, q, 1 + r), q, {1.0f}, k); },
      [&](int r) { return dequantized(random_codes(kn, q, 100 + r), q, {1.0f}, n); });
  // A8W8 accumulates exactly (int32): the fused and unfused outputs must agree bit for bit.
  // FP8/HiF8 multiply their decoded bf16 values with fp32 accumulation, whose order oneDNN
  // may choose by the rows of a call (the fused schedule's blocks against the unfused one's
  // chunks: AMX's bf16 kernel did, over TCP): within the reference's accumulation bound.
  const bool exact = q == DType::kInt8;
  const Check pair = check_pair(out, out_u, bf16, qref.acc_tol);
  const uint64_t differing = differing_elements(out, out_u, 2);
  uint64_t gather_wrong = 0;  // elements, over the quantized and bf16 ops' gather_outs
  if (agm && o.gather_output != 0)
    for (int r = 0; r < R; ++r) {
      const Bytes want = random_codes(mk, q, 1 + r);
      Bytes want_b(mk * 2);
      convert(want.data(), q, want_b.data(), bf16, mk);
      for (size_t i = 0; i < mk; ++i) {
        const size_t at = static_cast<size_t>(r) * mk + i;
        gather_wrong += (gathered[at] != want[i]) + (gathered_u[at] != want[i]);
        for (const Bytes* g : {&gatheredb, &gatheredb_u})
          gather_wrong += std::memcmp(&(*g)[2 * at], &want_b[2 * i], 2) != 0;
      }
    }
  uint64_t wrong[5] = {check_rows(out, bf16, n, qref).wrong +
                           check_rows(out_u, bf16, n, qref).wrong,
                       exact ? differing : pair.wrong,
                       check_rows(outb, bf16, n, bref).wrong +
                           check_rows(outb_u, bf16, n, bref).wrong,
                       gather_wrong, 0},
           all_wrong[5] = {};
  double est = 0;
  for (auto& x : v) est = std::max(est, time_us(x.run, 1));
  int iters =
      o.iters > 0 ? o.iters : std::clamp(static_cast<int>(3e5 / std::max(est, 1.0)), 1, 100000);
  MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int r = 0; r < o.rounds; ++r)
    for (auto& x : v) x.times.push_back(warm_time_us(x.run, iters));
  std::vector<double> t;
  for (auto& x : v) t.push_back(mean_over_ranks(median(x.times), R));
  // The timed calls' results too: `out` holds the quantized op's last timed call's.
  wrong[4] = check_rows(out, bf16, n, qref).wrong;
  MPI_Allreduce(wrong, all_wrong, 5, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  uint64_t total_wrong = 0, all_differing = 0;
  for (const uint64_t w : all_wrong) total_wrong += w;
  MPI_Allreduce(&differing, &all_differing, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "# commfuse bench %s (quantized, SPEC §6): %d ranks, transport %s, x1/x2 %s, output "
        "bfloat16, m=%lld (global) k=%lld n=%lld comm_turn %lld; median of %d rounds x %d\n"
        "# quant_unfused = the op's unfused algorithm (%s); bf16_* = the bfloat16 op at the "
        "same shape\n# plan (schedule %s): %s\n",
        o.op.c_str(), R, comm.transport_name(), o.dtype.c_str(), static_cast<long long>(o.m),
        static_cast<long long>(o.k), static_cast<long long>(n), static_cast<long long>(o.comm_turn),
        o.rounds, iters,
        agm ? "row scales and codes all-gathered, then the same quantized GEMM"
            : "the dequantized fp32 partial, then the fp32 collective",
        qf.schedule.c_str(), qf.description.c_str());
    // Where the list chose its unfused algorithm, both quantized columns time the same one.
    if (qf.schedule == "unfused")
      std::printf(
          "# the algorithm list chose unfused here: quant_fused and quant_unfused run "
          "the same algorithm (fusion_speedup ~1 by construction)\n");
    if (agm && o.gather_output == 0)
      std::printf("# --gather-output 0: the ops return no gather_out (gather_output false)\n");
    std::printf("%16s %16s %14s %16s %14s %14s %7s\n", "quant_fused(us)", "quant_unfused(us)",
                "bf16_fused(us)", "bf16_unfused(us)", "fusion_speedup", "vs_bf16_fused", "#wrong");
    std::printf("%16.1f %16.1f %14.1f %16.1f %13.2fx %13.2fx %7llu\n", t[0], t[1], t[2], t[3],
                t[1] / t[0], t[2] / t[0], static_cast<unsigned long long>(total_wrong));
    const std::string gather_check =
        !agm                   ? ""
        : o.gather_output != 0 ? ", " + std::to_string(all_wrong[3]) + " gather_out elements"
                               : ", no gather_out (--gather-output 0)";
    std::printf(
        "# #wrong (all ranks): %llu sampled elements of the quantized outputs vs float64, %llu "
        "quantized fused vs unfused (%s), %llu of the bf16 outputs vs float64%s, %llu of the "
        "last timed call's vs float64; fused and unfused quantized outputs %s\n\n",
        static_cast<unsigned long long>(all_wrong[0]),
        static_cast<unsigned long long>(all_wrong[1]),
        exact ? "A8W8: bitwise" : "within the fp32 accumulation bound",
        static_cast<unsigned long long>(all_wrong[2]), gather_check.c_str(),
        static_cast<unsigned long long>(all_wrong[4]),
        all_differing == 0 ? "bitwise equal" : "not bitwise equal");
    if (json)
      json->row(
          "{\"op\":\"%s\",\"transport\":\"%s\",\"world_size\":%d,"
          "\"dtype\":\"%s\",\"m\":%lld,\"k\":%lld,\"n\":%lld,\"comm_turn\":%lld,"
          "\"fused_us\":%.3f,\"unfused_us\":%.3f,\"bf16_fused_us\":%.3f,"
          "\"bf16_unfused_us\":%.3f,\"bitwise_equal\":%s,\"wrong\":%llu,"
          "\"schedule\":\"%s\",\"bf16_schedule\":\"%s\"}\n",
          o.op.c_str(), comm.transport_name(), R, o.dtype.c_str(), static_cast<long long>(o.m),
          static_cast<long long>(o.k), static_cast<long long>(n),
          static_cast<long long>(o.comm_turn), t[0], t[1], t[2], t[3],
          all_differing == 0 ? "true" : "false", static_cast<unsigned long long>(total_wrong),
          qf.schedule.c_str(), bf.schedule.c_str());
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace commfuse::cli
