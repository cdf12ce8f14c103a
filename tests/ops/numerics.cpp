// Numerics of the three ops against float64 references of the unfused composition
// (SPEC §2), run on every rank of a real multi-rank job.
//
// Integer-valued inputs (see values()): every fp32 partial sum is exact, so outputs must
// equal the exact result rounded once to the output dtype, bit for bit, whatever the GEMM's
// summation order. Random-valued inputs in [-1, 1): |out - ref| <= u_out·|ref| + g·S + 2^-24
// per element, where u_out is the output dtype's unit roundoff (2^-24 fp32, 2^-11 fp16,
// 2^-8 bf16: the one final rounding), S = Σ|x1·x2| + |bias| over the terms of that element,
// and g = (terms + 2)·2^-24 bounds fp32 accumulation of `terms` products (k for
// all_gather_matmul, R·k for the reducing ops) plus the bias add.
#include "numerics.hpp"
#include "reference_gemm.hpp"

#include "comm/comm_impl.hpp"
#include "comm/transport.hpp"
#include "core/cpu_features.hpp"
#include "core/params.hpp"
#include "kernels/cpu/half_gemm_model.hpp"
#include "ops/common/packed_weight.hpp"
#include "ops/common/plan_cache.hpp"

#include <commfuse/commfuse.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

namespace optest {
namespace {

enum class BiasKind { kNone, kSameDtype, kFloat32 };

struct Case {
  DType dtype = DType::kFloat32;
  BiasKind bias = BiasKind::kNone;
  bool transposed = false;
  bool random = false;
  int64_t comm_turn = 0;
  bool packed = false;  // x2 also passed packed ahead of the call (options.packed_x2)
};

std::string describe(const Case& c, const char* op) {
  return std::string(op) + " " + std::string(commfuse::dtype_name(c.dtype)) +
         (c.bias == BiasKind::kNone        ? " no-bias"
          : c.bias == BiasKind::kSameDtype ? " bias"
                                           : " bias-f32") +
         (c.transposed ? " x2^T" : "") + (c.random ? " random" : " integer") + " comm_turn " +
         std::to_string(c.comm_turn) + (c.packed ? " packed_x2" : "");
}

// One rank's operands in the op's dtype and, decoded, as float64.
struct Operands {
  std::vector<uint8_t> x1, x2, bias;    // x2 holds (n, k) when transposed
  std::vector<double> x1d, x2d, biasd;  // x2d is (k, n)
  DType bias_dtype = DType::kFloat32;
};

// x1_only: a peer's rows for a reference, without the weights and bias it does not need.
Operands make_operands(const Case& c, int rank, uint64_t tag, int64_t m, int64_t k, int64_t n,
                       bool x1_only = false) {
  Operands o;
  const uint64_t seed = tag * 1000 + static_cast<uint64_t>(rank) * 10;
  o.x1 = encode(values(seed + 1, static_cast<size_t>(m * k), c.random), c.dtype);
  o.x1d = decode(o.x1, c.dtype);
  if (x1_only) return o;
  // Each rank its own weights (SPEC §2: x2 is per-rank).
  std::vector<float> w = values(seed + 2, static_cast<size_t>(k * n), c.random);  // (k, n)
  std::vector<float> stored = w;
  if (c.transposed)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) stored[j * k + i] = w[i * n + j];
  o.x2 = encode(stored, c.dtype);
  std::vector<double> sd = decode(o.x2, c.dtype);
  o.x2d.resize(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) o.x2d[i * n + j] = c.transposed ? sd[j * k + i] : sd[i * n + j];
  if (c.bias != BiasKind::kNone) {
    // The same bias on every rank (added once by the reducing ops).
    o.bias_dtype = c.bias == BiasKind::kFloat32 ? DType::kFloat32 : c.dtype;
    o.bias = encode(values(tag * 1000 + 999, static_cast<size_t>(n), c.random), o.bias_dtype);
    o.biasd = decode(o.bias, o.bias_dtype);
  }
  return o;
}

commfuse::TensorView x2_view(const Operands& o, const Case& c, int64_t k, int64_t n) {
  if (c.transposed) return commfuse::TensorView(o.x2.data(), c.dtype, {n, k}).t();
  return commfuse::TensorView(o.x2.data(), c.dtype, {k, n});
}

std::optional<commfuse::TensorView> bias_view(const Operands& o, int64_t n) {
  if (o.bias.empty()) return std::nullopt;
  return commfuse::TensorView(o.bias.data(), o.bias_dtype, {n});
}

// out (rows x n) vs ref; S holds Σ|terms| per element.
void compare(const Case& c, const char* op, const std::vector<uint8_t>& out,
             const std::vector<double>& ref, const std::vector<double>& sum_abs, int terms) {
  const std::string what = describe(c, op);
  if (!c.random) {
    const auto want = round_to(ref, c.dtype);
    if (out != want) {
      const auto got = decode(out, c.dtype);
      size_t i = 0;
      while (i < got.size() && got[i] == decode(want, c.dtype)[i]) ++i;
      EXPECT(false, "%s: not bitwise equal to the rounded reference (first at %zu: %g vs %g)",
             what.c_str(), i, i < got.size() ? got[i] : 0.0, i < ref.size() ? ref[i] : 0.0);
    }
    return;
  }
  const auto got = decode(out, c.dtype);
  const double g = (terms + 2) * std::ldexp(1.0, -24);
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol =
        unit_roundoff(c.dtype) * std::fabs(ref[i]) + g * sum_abs[i] + std::ldexp(1.0, -24);
    if (!(std::fabs(got[i] - ref[i]) <= tol)) {
      EXPECT(false, "%s: element %zu is %.9g, reference %.9g, tolerance %.3g", what.c_str(), i,
             got[i], ref[i], tol);
      return;
    }
  }
}

// ---- all_gather_matmul ----

// One rank's all_gather_matmul call: its operands and output buffers (0xCD until written).
struct AgmCall {
  Operands mine;
  std::vector<uint8_t> output, gather;
  commfuse::AllGatherMatmulOptions options;
  commfuse::TensorView x1, x2, out, gather_view;
  std::shared_ptr<commfuse::PackedWeight> packed;  // c.packed: x2 packed for the m·R rows
};

AgmCall agm_call(const commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k,
                 int64_t n, bool gather_output) {
  const int R = comm.world_size();
  AgmCall a;
  a.mine = make_operands(c, comm.rank(), tag, m, k, n);
  a.output.assign(static_cast<size_t>(m * R * n) * elem_bytes(c.dtype), 0xCD);
  a.gather.assign(gather_output ? static_cast<size_t>(m * R * k) * elem_bytes(c.dtype) : 0, 0xCD);
  a.options.bias = bias_view(a.mine, n);
  a.options.gather_output = gather_output;
  a.options.comm_turn = c.comm_turn;
  a.x1 = commfuse::TensorView(a.mine.x1.data(), c.dtype, {m, k});
  a.x2 = x2_view(a.mine, c, k, n);
  a.out = commfuse::TensorView(a.output.data(), c.dtype, {m * R, n});
  a.gather_view = gather_output ? commfuse::TensorView(a.gather.data(), c.dtype, {m * R, k})
                                : commfuse::TensorView(nullptr, c.dtype, {0});
  if (c.packed) {
    a.packed = std::make_shared<commfuse::PackedWeight>(a.x2, m * R);
    a.options.packed_x2 = a.packed.get();
  }
  return a;
}

// Reference: gather_out = concat of every rank's x1 (bitwise); output = gather_out @ x2 + b.
void check_agm(const commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k,
               int64_t n, const AgmCall& a) {
  const int R = comm.world_size();
  std::vector<uint8_t> want_gather;
  std::vector<double> gathered;
  for (int s = 0; s < R; ++s) {
    const Operands o_s = make_operands(c, s, tag, m, k, n, /*x1_only=*/true);
    want_gather.insert(want_gather.end(), o_s.x1.begin(), o_s.x1.end());
    gathered.insert(gathered.end(), o_s.x1d.begin(), o_s.x1d.end());
  }
  if (a.options.gather_output)
    EXPECT(a.gather == want_gather, "%s: gather_out differs from the ranks' x1",
           describe(c, "all_gather_matmul").c_str());
  std::vector<double> ref(static_cast<size_t>(m * R * n)), sum_abs(ref.size());
  for (int64_t i = 0; i < m * R; ++i)
    for (int64_t j = 0; j < n; ++j) {
      ref[i * n + j] = a.mine.biasd.empty() ? 0.0 : a.mine.biasd[j];
      sum_abs[i * n + j] = std::fabs(ref[i * n + j]);
    }
  reference_gemm(gathered.data(), a.mine.x2d.data(), m * R, k, n, ref.data(), sum_abs.data());
  compare(c, "all_gather_matmul", a.output, ref, sum_abs, static_cast<int>(k));
}

void run_all_gather_matmul(commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k,
                           int64_t n, bool gather_output) {
  const AgmCall a = agm_call(comm, c, tag, m, k, n, gather_output);
  commfuse::all_gather_matmul(a.x1, a.x2, comm.name(), comm.world_size(), a.out, a.gather_view,
                              a.options);
  check_agm(comm, c, tag, m, k, n, a);
}

// ---- matmul_reduce_scatter / matmul_all_reduce ----

// Σ_s x1_s @ x2_s + bias over all m rows, with Σ|terms| per element.
void reduce_reference(const Case& c, int R, uint64_t tag, int64_t m, int64_t k, int64_t n,
                      std::vector<double>& ref, std::vector<double>& sum_abs) {
  ref.assign(static_cast<size_t>(m * n), 0.0);
  sum_abs.assign(ref.size(), 0.0);
  for (int s = 0; s < R; ++s) {
    const Operands o = make_operands(c, s, tag, m, k, n);
    reference_gemm(o.x1d.data(), o.x2d.data(), m, k, n, ref.data(), sum_abs.data());
    if (s == 0 && !o.biasd.empty())
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          ref[i * n + j] += o.biasd[j];
          sum_abs[i * n + j] += std::fabs(o.biasd[j]);
        }
  }
}

void check_mrs(const commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k,
               int64_t n, const std::vector<uint8_t>& output);
void check_mar(commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k, int64_t n,
               const std::vector<uint8_t>& output);

void run_matmul_reduce_scatter(commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m,
                               int64_t k, int64_t n) {
  const int R = comm.world_size(), me = comm.rank();
  const Operands mine = make_operands(c, me, tag, m, k, n);
  const int64_t rows = m / R;
  std::vector<uint8_t> output(static_cast<size_t>(rows * n) * elem_bytes(c.dtype), 0xCD);
  commfuse::MatmulReduceOptions o;
  o.bias = bias_view(mine, n);
  o.comm_turn = c.comm_turn;
  std::optional<commfuse::PackedWeight> packed;
  if (c.packed) o.packed_x2 = &packed.emplace(x2_view(mine, c, k, n), m);
  commfuse::matmul_reduce_scatter(commfuse::TensorView(mine.x1.data(), c.dtype, {m, k}),
                                  x2_view(mine, c, k, n), comm.name(), R,
                                  commfuse::TensorView(output.data(), c.dtype, {rows, n}), o);
  check_mrs(comm, c, tag, m, k, n, output);
}

// This rank's m/R rows of Σ_s x1_s @ x2_s + bias.
void check_mrs(const commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k,
               int64_t n, const std::vector<uint8_t>& output) {
  const int R = comm.world_size(), me = comm.rank();
  const int64_t rows = m / R;
  std::vector<double> ref, sum_abs;
  reduce_reference(c, R, tag, m, k, n, ref, sum_abs);
  const auto first = static_cast<std::ptrdiff_t>(me * rows * n);
  const auto last = static_cast<std::ptrdiff_t>((me + 1) * rows * n);
  compare(c, "matmul_reduce_scatter", output,
          std::vector<double>(ref.begin() + first, ref.begin() + last),
          std::vector<double>(sum_abs.begin() + first, sum_abs.begin() + last),
          static_cast<int>(R * k));
}

// x1 is (b, s, k) when b > 0, else (m, k).
void run_matmul_all_reduce(commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k,
                           int64_t n, int64_t b) {
  const int me = comm.rank();
  const Operands mine = make_operands(c, me, tag, m, k, n);
  std::vector<uint8_t> output(static_cast<size_t>(m * n) * elem_bytes(c.dtype), 0xCD);
  commfuse::MatmulReduceOptions o;
  o.bias = bias_view(mine, n);
  o.comm_turn = c.comm_turn;
  std::optional<commfuse::PackedWeight> packed;
  if (c.packed) o.packed_x2 = &packed.emplace(x2_view(mine, c, k, n), m);
  const auto x1 = b > 0 ? commfuse::TensorView(mine.x1.data(), c.dtype, {b, m / b, k})
                        : commfuse::TensorView(mine.x1.data(), c.dtype, {m, k});
  const auto out = b > 0 ? commfuse::TensorView(output.data(), c.dtype, {b, m / b, n})
                         : commfuse::TensorView(output.data(), c.dtype, {m, n});
  commfuse::matmul_all_reduce(x1, x2_view(mine, c, k, n), comm.name(), out, o);
  check_mar(comm, c, tag, m, k, n, output);
}

// Σ_s x1_s @ x2_s + bias, bitwise the same on every rank.
void check_mar(commfuse::Comm& comm, const Case& c, uint64_t tag, int64_t m, int64_t k, int64_t n,
               const std::vector<uint8_t>& output) {
  const int R = comm.world_size();
  std::vector<double> ref, sum_abs;
  reduce_reference(c, R, tag, m, k, n, ref, sum_abs);
  compare(c, "matmul_all_reduce", output, ref, sum_abs, static_cast<int>(R * k));
  // Bitwise identical on every rank: gather everyone's output and compare with rank 0's.
  std::vector<uint8_t> all(output.size() * R);
  comm.all_gather(output.data(), all.data(), output.size(), DType::kInt8);
  for (int s = 1; s < R; ++s)
    EXPECT(output.empty() ||
               std::memcmp(all.data(), all.data() + s * output.size(), output.size()) == 0,
           "%s: rank %d's output differs from rank 0's", describe(c, "matmul_all_reduce").c_str(),
           s);
}

// ---- the plan cache (src/ops/common/plan_cache.hpp) ----

template <typename Plan>
void execute(Plan& plan) {
  std::vector<float> workspace(plan.workspace_size() / sizeof(float) + 1);
  plan.execute(workspace.data(), plan.workspace_size());
}

bool untouched(const std::vector<uint8_t>& v) {
  return std::all_of(v.begin(), v.end(), [](uint8_t b) { return b == 0xCD; });
}

// Two plans of one descriptor over different buffers, both alive: the second comes from the
// cache and must run on its own pointers (x1, x2, bias, output, gather_out), leaving the
// first call's buffers alone; the first still runs on its own.
void check_plan_cache(commfuse::Comm& comm, uint64_t& tag) {
  const int R = comm.world_size();
  const int64_t k = 64, n = 24;
  for (DType dt : {DType::kBFloat16, DType::kFloat32})
    for (bool tr : {false, true}) {
      const Case c{dt, BiasKind::kSameDtype, tr, false, 0};
      const uint64_t ta = tag++, tb = tag++;
      AgmCall a = agm_call(comm, c, ta, 5, k, n, true), b = agm_call(comm, c, tb, 5, k, n, true);
      commfuse::AllGatherMatmulPlan pa(a.x1, a.x2, comm.name(), R, a.out, a.gather_view, a.options);
      const uint64_t hits = commfuse::ops::plan_cache_stats("all_gather_matmul").hits;
      commfuse::AllGatherMatmulPlan pb(b.x1, b.x2, comm.name(), R, b.out, b.gather_view, b.options);
      EXPECT(commfuse::ops::plan_cache_stats("all_gather_matmul").hits == hits + 1,
             "%s: the second plan of one descriptor did not come from the plan cache",
             describe(c, "all_gather_matmul").c_str());
      execute(pb);
      EXPECT(untouched(a.output) && untouched(a.gather),
             "%s: a plan of the same descriptor wrote the first plan's buffers",
             describe(c, "all_gather_matmul").c_str());
      check_agm(comm, c, tb, 5, k, n, b);
      execute(pa);
      check_agm(comm, c, ta, 5, k, n, a);

      // The reducing ops: x1, x2, bias and output of each call.
      const int64_t m = 2 * R, rows = m / R;
      const Operands ra = make_operands(c, comm.rank(), ta, m, k, n);
      const Operands rb = make_operands(c, comm.rank(), tb, m, k, n);
      std::vector<uint8_t> oa(static_cast<size_t>(rows * n) * elem_bytes(dt), 0xCD), ob = oa;
      commfuse::MatmulReduceOptions opa, opb;
      opa.bias = bias_view(ra, n);
      opb.bias = bias_view(rb, n);
      commfuse::MatmulReduceScatterPlan sa(commfuse::TensorView(ra.x1.data(), dt, {m, k}),
                                           x2_view(ra, c, k, n), comm.name(), R,
                                           commfuse::TensorView(oa.data(), dt, {rows, n}), opa);
      commfuse::MatmulReduceScatterPlan sb(commfuse::TensorView(rb.x1.data(), dt, {m, k}),
                                           x2_view(rb, c, k, n), comm.name(), R,
                                           commfuse::TensorView(ob.data(), dt, {rows, n}), opb);
      execute(sb);
      EXPECT(untouched(oa), "%s: a plan of the same descriptor wrote the first plan's output",
             describe(c, "matmul_reduce_scatter").c_str());
      check_mrs(comm, c, tb, m, k, n, ob);
      execute(sa);
      check_mrs(comm, c, ta, m, k, n, oa);

      std::vector<uint8_t> aa(static_cast<size_t>(m * n) * elem_bytes(dt), 0xCD), ab = aa;
      commfuse::MatmulAllReducePlan qa(commfuse::TensorView(ra.x1.data(), dt, {m, k}),
                                       x2_view(ra, c, k, n), comm.name(),
                                       commfuse::TensorView(aa.data(), dt, {m, n}), opa);
      commfuse::MatmulAllReducePlan qb(commfuse::TensorView(rb.x1.data(), dt, {m, k}),
                                       x2_view(rb, c, k, n), comm.name(),
                                       commfuse::TensorView(ab.data(), dt, {m, n}), opb);
      execute(qb);
      EXPECT(untouched(aa), "%s: a plan of the same descriptor wrote the first plan's output",
             describe(c, "matmul_all_reduce").c_str());
      check_mar(comm, c, tb, m, k, n, ab);
      execute(qa);
      check_mar(comm, c, ta, m, k, n, aa);

      // One plan type for every op: the three plans held alike and run again.
      std::vector<commfuse::Plan> plans;
      plans.push_back(std::move(pa));
      plans.push_back(std::move(sa));
      plans.push_back(std::move(qa));
      std::fill(a.output.begin(), a.output.end(), 0xCD);
      std::fill(a.gather.begin(), a.gather.end(), 0xCD);
      std::fill(oa.begin(), oa.end(), 0xCD);
      std::fill(aa.begin(), aa.end(), 0xCD);
      for (commfuse::Plan& plan : plans) execute(plan);
      check_agm(comm, c, ta, 5, k, n, a);
      check_mrs(comm, c, ta, m, k, n, oa);
      check_mar(comm, c, ta, m, k, n, aa);
      bool moved_from_rejected = false;
      try {
        (void)pa.workspace_size();  // NOLINT(bugprone-use-after-move): what is tested
      } catch (const commfuse::InvalidArgument&) {
        moved_from_rejected = true;
      }
      EXPECT(moved_from_rejected, "a moved-from plan did not say it is empty");
    }
}

// ---- x2 packed ahead of the calls (commfuse::PackedWeight) ----

// Zeroes a packed form's buffer (where the op reads it, its results become zero).
void zero_packed(const commfuse::PackedWeight& w) {
  const auto& impl = w.impl();
  if (impl.layout) std::memset(const_cast<void*>(impl.data()), 0, impl.layout->bytes);
}

bool all_zero(const std::vector<uint8_t>& out, DType dt) {
  const std::vector<double> got = decode(out, dt);
  return std::all_of(got.begin(), got.end(), [](double v) { return v == 0.0; });
}

// Where this machine packs x2, the plan reads the packed form and its results come from the
// packed buffer, not from x2: zeroing the buffer zeroes them. x2 (k = 1030, n = 520: padding
// of k, a column-block tail) is too big to stay in cache, so all_gather_matmul multiplies
// the gathered rows by one GEMM of m·R rows, the `rows` the form was packed for: its plan
// reads that layout by construction. Then a second PackedWeight of other values and the same
// shape (a plan-cache hit) once the first is destroyed: the call must read the new one.
void check_packed_weight_read(commfuse::Comm& comm, uint64_t& tag) {
  const int R = comm.world_size();
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (bool tr : {false, true}) {
      const Case c{dt, BiasKind::kNone, tr, false, 0, true};
      const std::string what = describe(c, "all_gather_matmul");
      const uint64_t t = tag++;
      AgmCall a = agm_call(comm, c, t, 5, 1030, 520, true);
      commfuse::AllGatherMatmulPlan plan(a.x1, a.x2, comm.name(), R, a.out, a.gather_view,
                                         a.options);
      const bool reads =
          plan.description().find("x2 prepacked (PackedWeight)") != std::string::npos;
      EXPECT(reads == a.packed->packed(), "%s: packed() %d, but the plan %s it: %s", what.c_str(),
             a.packed->packed(), reads ? "reads" : "does not read", plan.description().c_str());
      execute(plan);
      check_agm(comm, c, t, 5, 1030, 520, a);
      if (comm.rank() == 0)
        std::printf("%s: %s; the plan %s it\n", what.c_str(), a.packed->description().c_str(),
                    reads ? "reads" : "does not read");
      zero_packed(*a.packed);
      std::fill(a.output.begin(), a.output.end(), 0xCD);
      execute(plan);  // every rank, whatever it found: the call is collective
      EXPECT(!reads || all_zero(a.output, dt),
             "%s: zeroing the packed x2 did not zero the output: x2 was read instead",
             what.c_str());

      a.packed.reset();  // the cached plan must not keep reading it (ASan: freed memory)
      const uint64_t t2 = tag++;
      AgmCall b = agm_call(comm, c, t2, 5, 1030, 520, true);
      const uint64_t hits = commfuse::ops::plan_cache_stats("all_gather_matmul").hits;
      commfuse::AllGatherMatmulPlan again(b.x1, b.x2, comm.name(), R, b.out, b.gather_view,
                                          b.options);
      EXPECT(commfuse::ops::plan_cache_stats("all_gather_matmul").hits == hits + 1,
             "%s: the second PackedWeight's plan did not come from the cache", what.c_str());
      execute(again);
      check_agm(comm, c, t2, 5, 1030, 520, b);
    }
  // matmul_reduce_scatter's partial product (fp32 out) over m = 64R rows read packed too
  // where the form was made for them and the plan says it reads it.
  for (bool tr : {false, true}) {
    const Case c{DType::kBFloat16, BiasKind::kNone, tr, false, 0, true};
    const int64_t m = 64 * R, k = 66, n = 100;
    const Operands o = make_operands(c, comm.rank(), tag++, m, k, n);
    const commfuse::PackedWeight w(x2_view(o, c, k, n), m);
    commfuse::MatmulReduceOptions opt;
    opt.packed_x2 = &w;
    std::vector<uint8_t> out(static_cast<size_t>(64 * n) * 2, 0xCD);
    commfuse::MatmulReduceScatterPlan plan(commfuse::TensorView(o.x1.data(), c.dtype, {m, k}),
                                           x2_view(o, c, k, n), comm.name(), R,
                                           commfuse::TensorView(out.data(), c.dtype, {64, n}), opt);
    const bool reads = plan.description().find("x2 prepacked (PackedWeight)") != std::string::npos;
    EXPECT(reads <= w.packed(), "matmul_reduce_scatter reads a packed x2 that was not made: %s",
           plan.description().c_str());
    if (comm.rank() == 0)
      std::printf("matmul_reduce_scatter bfloat16%s: the plan %s the packed x2\n",
                  tr ? " x2^T" : "", reads ? "reads" : "does not read");
    zero_packed(w);
    execute(plan);
    // The output sums every rank's partial product, so it is zero only where every rank's
    // plan reads its packed x2: each process measures its own GEMM model, and ranks that
    // share cores may measure a close choice differently.
    const int32_t mine = reads ? 1 : 0;
    int32_t readers = 0;
    comm.all_reduce(&mine, &readers, 1, DType::kInt32);
    EXPECT(readers < R || all_zero(out, c.dtype),
           "matmul_reduce_scatter%s: zeroing the packed x2 did not zero the output",
           tr ? " x2^T" : "");
  }
}

// The algorithm every op below runs: what COMMFUSE_ALGO forces, else the list's choice, which
// must be one of the list's names. Checked on plans of a small shape, so that a run with an
// algorithm forced (tests/ops/CMakeLists.txt) really tests that algorithm.
void check_algorithms(commfuse::Comm& comm) {
  const int R = comm.world_size();
  const char* env = std::getenv("COMMFUSE_ALGO");
  const std::string algo = env != nullptr ? env : "";
  auto forced = [&](const std::string& op) -> std::string {
    const size_t at = algo.find(op + ":");
    if (at == std::string::npos) return "";
    const size_t from = at + op.size() + 1;
    return algo.substr(from, algo.find(',', from) - from);
  };
  auto check = [&](const std::string& op, const std::string& got) {
    const std::string want = forced(op);
    EXPECT(want.empty() ? (got == "fused" || got == "unfused" || got == "fused_rs_all_gather")
                        : got == want,
           "%s: schedule %s, COMMFUSE_ALGO '%s'", op.c_str(), got.c_str(), algo.c_str());
  };
  // Planned only, never run; still every output apart from every input (check_disjoint).
  const size_t at = static_cast<size_t>(64 * R);
  std::vector<float> buf(4 * at, 0.0f);
  const commfuse::TensorView x1(buf.data(), DType::kFloat32, {2, 4});
  const commfuse::TensorView x2(buf.data() + at, DType::kFloat32, {4, 8});
  const commfuse::TensorView out(buf.data() + 2 * at, DType::kFloat32, {2 * R, 8});
  const commfuse::TensorView gather(buf.data() + 3 * at, DType::kFloat32, {2 * R, 4});
  check("all_gather_matmul",
        commfuse::AllGatherMatmulPlan(x1, x2, comm.name(), R, out, gather).schedule_name());
  const commfuse::TensorView x1r(buf.data(), DType::kFloat32, {2 * R, 4});
  check("matmul_reduce_scatter",
        commfuse::MatmulReduceScatterPlan(
            x1r, x2, comm.name(), R,
            commfuse::TensorView(buf.data() + 2 * at, DType::kFloat32, {2, 8}))
            .schedule_name());
  check("matmul_all_reduce",
        commfuse::MatmulAllReducePlan(
            x1, x2, comm.name(), commfuse::TensorView(buf.data() + 2 * at, DType::kFloat32, {2, 8}))
            .schedule_name());
  // x2 that does not stay in cache (1024 × 520 fp32 > 2 MiB): fused would stage every row
  // for one GEMM after the last block, so the list takes the unfused all_gather, on every
  // rank alike (all_gather_matmul/plan.cpp: stages_every_row).
  if (forced("all_gather_matmul").empty() && R >= 2) {
    const int64_t k = 1024, n = 520;
    std::vector<float> big(static_cast<size_t>(2 * k + k * n + 2 * R * n + 2 * R * k));
    float* b = big.data();
    const std::string got =
        commfuse::AllGatherMatmulPlan(
            commfuse::TensorView(b, DType::kFloat32, {2, k}),
            commfuse::TensorView(b + 2 * k, DType::kFloat32, {k, n}), comm.name(), R,
            commfuse::TensorView(b + 2 * k + k * n, DType::kFloat32, {2 * R, n}),
            commfuse::TensorView(b + 2 * k + k * n + 2 * R * n, DType::kFloat32, {2 * R, k}))
            .schedule_name();
    EXPECT(got == "unfused",
           "all_gather_matmul 2 rows/rank x 1024 x 520 fp32: schedule %s, "
           "expected unfused (every row would be staged for one GEMM)",
           got.c_str());
    // 1-row bf16 blocks with x2 in cache: multiplied on arrival by the direct kernel where
    // rank 0's few-rows model says R calls of it pay (Transport::direct_calls_pay, measured
    // at set-up), staged for one GEMM otherwise, and then the list takes unfused: on every
    // rank alike, whatever each process's own timing says. Nothing is measured where
    // ranks share cores or COMMFUSE_HALF_GEMM pins the kernel (ops_shm_numerics_half_pinned):
    // unfused there.
    const int64_t tk = 256, tn = 256;
    std::vector<uint16_t> tiny(static_cast<size_t>(tk + tk * tn + R * tn + R * tk), 0);
    uint16_t* t = tiny.data();
    const std::string tiny_got =
        commfuse::AllGatherMatmulPlan(
            commfuse::TensorView(t, DType::kBFloat16, {1, tk}),
            commfuse::TensorView(t + tk, DType::kBFloat16, {tk, tn}), comm.name(), R,
            commfuse::TensorView(t + tk + tk * tn, DType::kBFloat16, {R, tn}),
            commfuse::TensorView(t + tk + tk * tn + R * tn, DType::kBFloat16, {R, tk}))
            .schedule_name();
    // 128-row bf16 blocks, x2 in cache: multiplied on arrival where bytes move while a rank
    // computes (MPI); on shm, whose ranks copy the blocks themselves, only without gather_out
    // (then fused keeps each peer's block in cache): with it, the unfused composition.
    for (const bool gather_output : {true, false}) {
      const int64_t mk = 512, mn = 256, mm = 128;
      std::vector<uint16_t> mid(static_cast<size_t>(mm * mk + mk * mn + R * mm * (mn + mk)), 0);
      uint16_t* q = mid.data();
      commfuse::AllGatherMatmulOptions options;
      options.gather_output = gather_output;
      const std::string mid_got =
          commfuse::AllGatherMatmulPlan(
              commfuse::TensorView(q, DType::kBFloat16, {mm, mk}),
              commfuse::TensorView(q + mm * mk, DType::kBFloat16, {mk, mn}), comm.name(), R,
              commfuse::TensorView(q + mm * mk + mk * mn, DType::kBFloat16, {R * mm, mn}),
              gather_output ? commfuse::TensorView(q + mm * mk + mk * mn + R * mm * mn,
                                                   DType::kBFloat16, {R * mm, mk})
                            : commfuse::TensorView(),
              options)
              .schedule_name();
      const bool fused_wanted = comm.impl().transport().overlaps_compute() || !gather_output;
      EXPECT(mid_got == std::string(fused_wanted ? "fused" : "unfused"),
             "all_gather_matmul 128 rows/rank x 512 x 256 bf16 over %s, gather_output %d: "
             "schedule %s, expected %s",
             comm.impl().transport().name(), gather_output ? 1 : 0, mid_got.c_str(),
             fused_wanted ? "fused" : "unfused");
    }
    const int32_t fused = tiny_got == "fused" ? 1 : 0;
    int32_t fused_ranks = 0;
    comm.all_reduce(&fused, &fused_ranks, 1, DType::kInt32);
    EXPECT(fused_ranks == 0 || fused_ranks == R,
           "all_gather_matmul 1 row/rank x 256 x 256 bf16: %d of %d ranks chose fused", fused_ranks,
           R);
    // The verdict bits themselves: the same on every rank, and none where nothing is timed.
    int32_t bits = 0;
    for (const DType bt : {DType::kFloat16, DType::kBFloat16})
      for (int64_t bm = 1; bm <= commfuse::kernels::cpu::kDirectCallsRows; ++bm)
        bits = bits * 2 + (comm.impl().transport().direct_calls_pay(bt, bm) ? 1 : 0);
    // The sum is R times this rank's bits on every rank only if they are all the same (a rank
    // whose bits differ from the mean fails).
    int32_t sum = 0;
    comm.all_reduce(&bits, &sum, 1, DType::kInt32);
    EXPECT(sum == bits * R,
           "the few-rows verdict bits differ between ranks (this rank 0x%x, sum %d over %d ranks)",
           static_cast<unsigned>(bits), sum, R);
    // As the library reads it (validated, any case).
    const std::string pin = commfuse::params::kernel_pin("COMMFUSE_HALF_GEMM", "native");
    const bool timed = pin == "auto" && R <= commfuse::cpu::online_cores();
    EXPECT(timed || (tiny_got == "unfused" && bits == 0),
           "all_gather_matmul 1 row/rank x 256 x 256 bf16: schedule %s, verdict bits 0x%x; "
           "expected unfused and none (no few-rows model timed: COMMFUSE_HALF_GEMM=%s, %d ranks)",
           tiny_got.c_str(), static_cast<unsigned>(bits), pin.c_str(), R);
  }
}

}  // namespace

int case_numerics(commfuse::Comm& comm) {
  const int R = comm.world_size();
  check_algorithms(comm);
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  const BiasKind biases[] = {BiasKind::kNone, BiasKind::kSameDtype, BiasKind::kFloat32};
  const int64_t turns[] = {0, 1, 3, 64};
  const int64_t k = 64, n = 24;
  uint64_t tag = 1;
  int idx = 0;
  for (DType dt : dtypes)
    for (BiasKind bk : biases)
      for (bool tr : {false, true}) {
        Case c{dt, bk, tr, false, turns[idx % 4]};
        ++idx;
        // m = 5 rows per rank: not a multiple of any chunking.
        run_all_gather_matmul(comm, c, tag++, 5, k, n, true);
        c.comm_turn = turns[idx % 4];
        run_all_gather_matmul(comm, c, tag++, 5, k, n, false);
        run_matmul_reduce_scatter(comm, c, tag++, 3 * R, k, n);
        run_matmul_all_reduce(comm, c, tag++, 6, k, n, idx % 2 ? 2 : 0);
      }
  for (DType dt : dtypes) {
    // m = 0: empty outputs, the op still synchronizes.
    Case c{dt, BiasKind::kSameDtype, false, false, 0};
    run_all_gather_matmul(comm, c, tag++, 0, k, n, true);
    run_all_gather_matmul(comm, c, tag++, 0, k, n, false);
    run_matmul_reduce_scatter(comm, c, tag++, 0, k, n);
    run_matmul_all_reduce(comm, c, tag++, 0, k, n, 0);
    // m = 70 rows per rank: at or above all_gather_matmul's batching threshold, so each
    // arriving block is multiplied on its own (m = 5 above is staged: the list runs the
    // unfused all_gather there unless forced, below).
    c = Case{dt, BiasKind::kSameDtype, false, false, 3};
    run_all_gather_matmul(comm, c, tag++, 70, k, n, true);
    c = Case{dt, BiasKind::kNone, true, false, 0};
    run_all_gather_matmul(comm, c, tag++, 70, k, n, false);
    // One and two rows per rank: where the direct kernel takes blocks of m rows but not the
    // m * R gathered ones and ranks have a core each, each block is multiplied on arrival
    // (all_gather_matmul/plan.cpp: direct_blocks); otherwise staged, one direct or native call.
    for (const int64_t m : {int64_t{1}, int64_t{2}}) {
      run_all_gather_matmul(comm, Case{dt, BiasKind::kFloat32, false, false, 0}, tag++, m, k, n,
                            true);
      run_all_gather_matmul(comm, Case{dt, BiasKind::kNone, true, false, 1}, tag++, m, k, n, false);
    }
    // x2 of n = 100 (a 64-column block and a tail) and k = 66 (not a multiple of the 32-row
    // blocks): where this CPU's native 16-bit kernel reads x2 packed (kernels/cpu/packed_b),
    // its vector loop, its scalar tail and its zero padding.
    c = Case{dt, BiasKind::kSameDtype, false, false, 0};
    run_all_gather_matmul(comm, c, tag++, 70, 66, 100, true);
    run_matmul_reduce_scatter(comm, c, tag++, 70 * R, 66, 100);
    // Many gathered rows, in small pieces and (comm_turn 1) in one piece per rank.
    if (R > 1) {
      c = Case{dt, BiasKind::kFloat32, false, false, 0};
      run_all_gather_matmul(comm, c, tag++, 1100 / R + 1, k, n, true);
      c = Case{dt, BiasKind::kNone, false, false, 1};
      run_all_gather_matmul(comm, c, tag++, 1030, k, n, false);
    }
    // x2 too big to stay in cache (k·n·4 > 2 MiB, all_gather_matmul/plan.hpp): fused would
    // stage the rows for one GEMM, so the list gathers them unfused (the forced loop below
    // runs the fused staging).
    c = Case{dt, BiasKind::kSameDtype, true, false, 2};
    run_all_gather_matmul(comm, c, tag++, 5, 1024, 520, true);
    // Random values: tolerance from the dtype and k (file comment).
    c = Case{dt, BiasKind::kFloat32, true, true, 3};
    run_all_gather_matmul(comm, c, tag++, 8, k, 32, true);
    run_matmul_reduce_scatter(comm, c, tag++, 8 * R, k, 32);
    run_matmul_all_reduce(comm, c, tag++, 8, k, 32, 0);
    // The same with every algorithm of each list forced in turn, so that each one is checked
    // at every world size and on every transport this driver runs on, not only where the
    // list would pick it (fused_rs_all_gather needs R >= 2 and R | m; m = 8 R here).
    for (const char* a : {"fused", "unfused"}) {
      const ScopedAlgo force(std::string("all_gather_matmul:") + a + ",matmul_reduce_scatter:" + a +
                             ",matmul_all_reduce:" + a);
      check_algorithms(comm);  // the plans really run `a`
      run_all_gather_matmul(comm, c, tag++, 8, k, 32, a[0] == 'f');
      // Staged blocks (5 rows per rank), in gather_out and in the workspace, and an x2 that
      // does not stay in cache: the lists pick unfused for these by default (every row
      // would be staged for one GEMM), so they are forced here.
      run_all_gather_matmul(comm, c, tag++, 5, k, n, true);
      run_all_gather_matmul(comm, c, tag++, 5, k, n, false);
      run_all_gather_matmul(comm, Case{dt, BiasKind::kSameDtype, true, false, 2}, tag++, 5, 1024,
                            520, true);
      // Empty x1 (the op still synchronizes) and one row per rank: the list gathers these
      // with the unfused all_gather where every row would be staged for one GEMM.
      run_all_gather_matmul(comm, Case{dt, BiasKind::kSameDtype, false, false, 0}, tag++, 0, k, n,
                            true);
      run_all_gather_matmul(comm, Case{dt, BiasKind::kNone, true, false, 1}, tag++, 1, k, n, false);
      run_matmul_reduce_scatter(comm, c, tag++, 8 * R, k, 32);
      run_matmul_all_reduce(comm, c, tag++, 8 * R, k, 32, 0);
    }
    if (R >= 2) {
      const ScopedAlgo force("matmul_all_reduce:fused_rs_all_gather");
      run_matmul_all_reduce(comm, c, tag++, 8 * R, k, 32, 0);
    }
  }
  // x2 packed ahead of the call, every dtype and layout, integer and random values; the
  // reducing ops' m = 8R rows. On a machine without a native 16-bit kernel nothing packs and
  // these check that the ops then read x2 as given.
  for (DType dt : dtypes)
    for (bool tr : {false, true})
      for (bool random : {false, true}) {
        const Case c{dt, random ? BiasKind::kFloat32 : BiasKind::kSameDtype, tr, random, 0, true};
        run_all_gather_matmul(comm, c, tag++, 70, 66, 100, true);
        run_all_gather_matmul(comm, c, tag++, 5, k, n, false);
        run_matmul_reduce_scatter(comm, c, tag++, 8 * R, 66, 100);
        run_matmul_all_reduce(comm, c, tag++, 8 * R, k, 32, 0);
      }
  check_packed_weight_read(comm, tag);
  check_plan_cache(comm, tag);
  check_quant_all_gather_matmul(comm, tag);
  return 0;
}

}  // namespace optest
