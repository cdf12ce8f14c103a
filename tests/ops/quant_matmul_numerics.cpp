// Numerics of the quantized mode (SPEC §6: A8W8, FP8, HiF8) of all_gather_matmul,
// matmul_reduce_scatter and matmul_all_reduce against float64 references, on every rank of a real
// multi-rank job (called from case_numerics, so it runs at every world size, on shm and MPI, with
// each algorithm the tests force).
//
// Exact by construction, so compared bit for bit: codes are small integers (or, for A8W8,
// the whole int8 range with k = 64: |acc| <= 2^20), every scale is a power of two, biases are
// small integers: f32(acc) * (s1 * s2) + bias is exact in fp32 and the output is the float64
// value rounded once to the output dtype.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "numerics.hpp"
#include "reference_gemm.hpp"

#include "ops/common/packed_weight.hpp"
#include "ops/common/plan_cache.hpp"

namespace optest {
namespace {

using commfuse::TensorView;

enum class ScaleShape { kAbsent, kTensor, kVector, kColumn };  // (1,), (len,), (len, 1) / (1, n)

struct QCase {
  DType a = DType::kInt8, b = DType::kInt8;
  DType out = DType::kBFloat16;
  ScaleShape s1 = ScaleShape::kVector, s2 = ScaleShape::kVector;
  DType bias = DType::kFloat32;  // kInt32: A8W8's int32 bias; kInt8: none
  bool transposed = false;
  bool full_int8 = false;  // A8W8: codes over all of [-128, 127]
  bool gather_output = true;
  int64_t comm_turn = 0;
  bool packed = false;  // A8W8: x2 also passed prepared ahead (options.packed_x2)
};

std::string describe(const QCase& c, int64_t m) {
  auto name = [](DType t) { return std::string(commfuse::dtype_name(t)); };
  return "all_gather_matmul " + name(c.a) + " x " + name(c.b) + " -> " + name(c.out) +
         " m=" + std::to_string(m) + " s1 " + std::to_string(static_cast<int>(c.s1)) + " s2 " +
         std::to_string(static_cast<int>(c.s2)) + " bias " +
         (c.bias == DType::kInt8 ? std::string("none") : name(c.bias)) +
         (c.transposed ? " x2^T" : "") + (c.full_int8 ? " full-int8" : "") + " comm_turn " +
         std::to_string(c.comm_turn) + (c.packed ? " packed_x2" : "");
}

// Codes of dtype t for values v (exact: small integers, or int8 codes directly).
std::vector<uint8_t> codes(const std::vector<float>& v, DType t) {
  return encode(v, t);
}

std::vector<float> full_int8_values(uint64_t seed, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = static_cast<float>(static_cast<int>(mix(seed, i) % 256) - 128);
  return v;
}

float pow2_scale(uint64_t seed, size_t i) {
  return std::ldexp(1.0f, static_cast<int>(mix(seed, i) % 5) - 2);  // 2^-2 .. 2^2
}

struct QOperands {
  std::vector<uint8_t> x1, x2;  // x2 holds (n, k) when transposed
  std::vector<float> x1f, x2f;  // values; x2f is (k, n)
  std::vector<float> s1, s2;    // as passed (absent: empty)
  std::vector<uint8_t> bias;
  std::vector<double> biasd;
};

// x1_only: a peer's rows and their scales for a reference, without its weights and bias.
QOperands make(const QCase& c, int rank, uint64_t tag, int64_t m, int64_t k, int64_t n,
               bool x1_only = false) {
  QOperands o;
  const uint64_t seed = tag * 1000 + static_cast<uint64_t>(rank) * 10;
  o.x1f = c.full_int8 ? full_int8_values(seed + 1, static_cast<size_t>(m * k))
                      : values(seed + 1, static_cast<size_t>(m * k), false);
  o.x1 = codes(o.x1f, c.a);
  const size_t s1_len = c.s1 == ScaleShape::kAbsent   ? 0
                        : c.s1 == ScaleShape::kTensor ? 1
                                                      : static_cast<size_t>(m);
  for (size_t i = 0; i < s1_len; ++i) o.s1.push_back(pow2_scale(seed + 3, i));
  if (x1_only) return o;
  o.x2f = c.full_int8 ? full_int8_values(seed + 2, static_cast<size_t>(k * n))
                      : values(seed + 2, static_cast<size_t>(k * n), false);
  std::vector<float> stored = o.x2f;
  if (c.transposed)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) stored[j * k + i] = o.x2f[i * n + j];
  o.x2 = codes(stored, c.b);
  const size_t s2_len = c.s2 == ScaleShape::kTensor ? 1 : static_cast<size_t>(n);
  for (size_t j = 0; j < s2_len; ++j) o.s2.push_back(pow2_scale(seed + 4, j));
  if (c.bias != DType::kInt8) {
    std::vector<float> bv = values(seed + 5, static_cast<size_t>(n), false);
    if (c.bias == DType::kInt32) {
      o.bias.resize(static_cast<size_t>(n) * 4);
      for (int64_t j = 0; j < n; ++j) {
        const auto v = static_cast<int32_t>(bv[j]) * 1000;  // beyond any float code's range
        std::memcpy(o.bias.data() + j * 4, &v, 4);
        o.biasd.push_back(v);
      }
    } else {
      o.bias = encode(bv, c.bias);
      o.biasd = decode(o.bias, c.bias);
    }
  }
  return o;
}

// output must equal want (the exact reference rounded once to dt) bit for bit; on a
// difference, says where the first one is.
void expect_bitwise(const std::string& what, const std::vector<uint8_t>& output,
                    const std::vector<uint8_t>& want, DType dt) {
  if (output == want) return;
  const auto got = decode(output, dt), w = decode(want, dt);
  size_t i = 0;
  while (i < got.size() && got[i] == w[i]) ++i;
  EXPECT(false, "%s: not bitwise equal to the rounded reference (first at %zu: %g vs %g)",
         what.c_str(), i, i < got.size() ? got[i] : 0.0, i < w.size() ? w[i] : 0.0);
}

// x1_scale and x2_scale in the shapes the case asks for ((m, 1) / (1, n) for kColumn).
template <typename Options>
void set_scales(const QCase& c, const QOperands& o, int64_t m, int64_t n, Options& opt) {
  auto vec = [](const std::vector<float>& v) {
    return TensorView(v.data(), DType::kFloat32, {static_cast<int64_t>(v.size())});
  };
  if (!o.s1.empty())
    opt.x1_scale =
        c.s1 == ScaleShape::kColumn ? TensorView(o.s1.data(), DType::kFloat32, {m, 1}) : vec(o.s1);
  opt.x2_scale =
      c.s2 == ScaleShape::kColumn ? TensorView(o.s2.data(), DType::kFloat32, {1, n}) : vec(o.s2);
}

TensorView x2_view(const QCase& c, const QOperands& o, int64_t k, int64_t n) {
  return c.transposed ? TensorView(o.x2.data(), c.b, {n, k}).t()
                      : TensorView(o.x2.data(), c.b, {k, n});
}

// One rank's call: its operands, output buffers (0xCD until written) and views.
struct QCall {
  QOperands mine;
  std::vector<uint8_t> output, gather;
  commfuse::AllGatherMatmulOptions o;
  TensorView x1, x2, out, gv;
  std::shared_ptr<commfuse::PackedWeight> packed;  // c.packed: x2 prepared for the m·R rows
};

QCall q_call(const commfuse::Comm& comm, const QCase& c, uint64_t tag, int64_t m, int64_t k,
             int64_t n) {
  const int R = comm.world_size();
  QCall q;
  q.mine = make(c, comm.rank(), tag, m, k, n);
  q.output.assign(static_cast<size_t>(m * R * n) * elem_bytes(c.out), 0xCD);
  q.gather.assign(c.gather_output ? static_cast<size_t>(m * R * k) : 0, 0xCD);
  q.o.gather_output = c.gather_output;
  q.o.comm_turn = c.comm_turn;
  set_scales(c, q.mine, m, n, q.o);
  if (!q.mine.bias.empty()) q.o.bias = TensorView(q.mine.bias.data(), c.bias, {n});
  q.x1 = TensorView(q.mine.x1.data(), c.a, {m, k});
  q.x2 = x2_view(c, q.mine, k, n);
  if (c.packed) {
    q.packed = std::make_shared<commfuse::PackedWeight>(q.x2, m * R);
    q.o.packed_x2 = q.packed.get();
  }
  q.out = TensorView(q.output.data(), c.out, {m * R, n});
  q.gv = c.gather_output ? TensorView(q.gather.data(), c.a, {m * R, k})
                         : TensorView(nullptr, c.a, {0});
  return q;
}

// Reference: rank s's rows with rank s's x1 scales; this rank's x2, x2 scale and bias.
void q_check(const commfuse::Comm& comm, const QCase& c, uint64_t tag, int64_t m, int64_t k,
             int64_t n, const QCall& q) {
  const int R = comm.world_size();
  const QOperands& mine = q.mine;
  const std::string what = describe(c, m);
  std::vector<uint8_t> want_gather;
  std::vector<double> ref(static_cast<size_t>(m * R * n));
  for (int s = 0; s < R; ++s) {
    const QOperands os = make(c, s, tag, m, k, n, /*x1_only=*/true);
    want_gather.insert(want_gather.end(), os.x1.begin(), os.x1.end());
    std::vector<double> sums(static_cast<size_t>(m * n), 0.0);
    reference_gemm(os.x1f.data(), mine.x2f.data(), m, k, n, sums.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = sums[static_cast<size_t>(i * n + j)];
        if (c.bias == DType::kInt32) acc += mine.biasd[j];
        const double s1 = os.s1.empty() ? 1.0 : os.s1[os.s1.size() == 1 ? 0 : i];
        const double s2 = mine.s2[mine.s2.size() == 1 ? 0 : j];
        double y = acc * (s1 * s2);
        if (c.bias != DType::kInt32 && !mine.biasd.empty()) y += mine.biasd[j];
        ref[static_cast<size_t>((s * m + i) * n + j)] = y;
      }
  }
  if (c.gather_output)
    EXPECT(q.gather == want_gather, "%s: gather_out differs from the ranks' x1 codes",
           what.c_str());
  const auto want = round_to(ref, c.out);
  expect_bitwise(what, q.output, want, c.out);
}

void run_case(commfuse::Comm& comm, const QCase& c, uint64_t tag, int64_t m, int64_t k, int64_t n) {
  const QCall q = q_call(comm, c, tag, m, k, n);
  commfuse::all_gather_matmul(q.x1, q.x2, comm.name(), comm.world_size(), q.out, q.gv, q.o);
  q_check(comm, c, tag, m, k, n, q);
}

// The plan cache with quantized operands: two plans of one descriptor over different codes,
// x1/x2 scales and int32 bias, both alive; the second comes from the cache and must bind
// all of them (the scales and the int32 bias sit in the block product's shape too).
void check_quant_plan_cache(commfuse::Comm& comm, uint64_t& tag) {
  const int R = comm.world_size();
  const QCase cases[] = {{DType::kInt8, DType::kInt8, DType::kBFloat16, ScaleShape::kVector,
                          ScaleShape::kVector, DType::kInt32, false, true},
                         {DType::kFloat8E4M3FN, DType::kFloat8E4M3FN, DType::kFloat32,
                          ScaleShape::kTensor, ScaleShape::kVector, DType::kFloat32, true}};
  for (const QCase& c : cases) {
    const uint64_t ta = tag++, tb = tag++;
    const int64_t m = 70, k = 64, n = 24;
    QCall a = q_call(comm, c, ta, m, k, n), b = q_call(comm, c, tb, m, k, n);
    commfuse::AllGatherMatmulPlan pa(a.x1, a.x2, comm.name(), R, a.out, a.gv, a.o);
    const uint64_t hits = commfuse::ops::plan_cache_stats("all_gather_matmul").hits;
    commfuse::AllGatherMatmulPlan pb(b.x1, b.x2, comm.name(), R, b.out, b.gv, b.o);
    EXPECT(commfuse::ops::plan_cache_stats("all_gather_matmul").hits == hits + 1,
           "%s: the second plan of one descriptor did not come from the plan cache",
           describe(c, m).c_str());
    std::vector<float> ws(pb.workspace_size() / sizeof(float) + 1);
    pb.execute(ws.data(), pb.workspace_size());
    EXPECT(std::all_of(a.output.begin(), a.output.end(), [](uint8_t v) { return v == 0xCD; }),
           "%s: a plan of the same descriptor wrote the first plan's output",
           describe(c, m).c_str());
    q_check(comm, c, tb, m, k, n, b);
    pa.execute(ws.data(), pa.workspace_size());
    q_check(comm, c, ta, m, k, n, a);
  }
}

// matmul_reduce_scatter (all_reduce false) or matmul_all_reduce (x1 3-D (2, m/2, k) when
// three_d): Σ_s f32(acc_s) * (s1_s[i] * s2_s[j]) in rank order, + bias once, one rounding.
// The bias is the same on every rank (each rank's own seed would differ: tag only).
void run_reduce_case(commfuse::Comm& comm, const QCase& c, uint64_t tag, int64_t m, int64_t k,
                     int64_t n, bool all_reduce, bool three_d) {
  const int R = comm.world_size(), me = comm.rank();
  const QOperands mine = make(c, me, tag, m, k, n);
  const QOperands rank0 = make(c, 0, tag, m, k, n);  // the bias every rank passes
  const int64_t out_rows = all_reduce ? m : m / R;
  std::vector<uint8_t> output(static_cast<size_t>(out_rows * n) * elem_bytes(c.out), 0xCD);
  commfuse::MatmulReduceOptions o;
  o.comm_turn = c.comm_turn;
  set_scales(c, mine, m, n, o);
  if (!rank0.bias.empty()) o.bias = TensorView(rank0.bias.data(), c.bias, {n});
  const TensorView x2 = x2_view(c, mine, k, n);
  std::optional<commfuse::PackedWeight> packed;
  if (c.packed) o.packed_x2 = &packed.emplace(x2, m);
  if (all_reduce) {
    const auto x1 = three_d ? TensorView(mine.x1.data(), c.a, {2, m / 2, k})
                            : TensorView(mine.x1.data(), c.a, {m, k});
    const auto out = three_d ? TensorView(output.data(), c.out, {2, m / 2, n})
                             : TensorView(output.data(), c.out, {m, n});
    commfuse::matmul_all_reduce(x1, x2, comm.name(), out, o);
  } else {
    commfuse::matmul_reduce_scatter(TensorView(mine.x1.data(), c.a, {m, k}), x2, comm.name(), R,
                                    TensorView(output.data(), c.out, {out_rows, n}), o);
  }
  // fp32 sum in rank order of exact terms: exact, so float64 gives the same value.
  std::vector<double> ref(static_cast<size_t>(m * n), 0.0);
  for (int s = 0; s < R; ++s) {
    const QOperands os = make(c, s, tag, m, k, n);
    std::vector<double> sums(static_cast<size_t>(m * n), 0.0);
    reference_gemm(os.x1f.data(), os.x2f.data(), m, k, n, sums.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double acc = sums[static_cast<size_t>(i * n + j)];
        const double s1 = os.s1.empty() ? 1.0 : os.s1[os.s1.size() == 1 ? 0 : i];
        const double s2 = os.s2[os.s2.size() == 1 ? 0 : j];
        ref[static_cast<size_t>(i * n + j)] += acc * (s1 * s2);
      }
  }
  if (!rank0.biasd.empty())
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) ref[static_cast<size_t>(i * n + j)] += rank0.biasd[j];
  const auto first = static_cast<std::ptrdiff_t>(all_reduce ? 0 : me * out_rows * n);
  const std::vector<double> mine_ref(ref.begin() + first, ref.begin() + first + out_rows * n);
  const auto want = round_to(mine_ref, c.out);
  const std::string what = std::string(all_reduce ? "matmul_all_reduce" : "matmul_reduce_scatter") +
                           describe(c, m).substr(std::strlen("all_gather_matmul"));
  expect_bitwise(what, output, want, c.out);
}

// An int8 x2 prepared ahead (PackedWeight) is what the plan reads wherever it says so: zeroing
// the prepared buffer then zeroes the output (no bias), so x2 itself was not read. Where
// the plan reads x2 as given (the direct kernel of a few rows), it must not claim to.
void check_int8_packed_read(commfuse::Comm& comm, uint64_t& tag) {
  const int R = comm.world_size();
  const QCase c{DType::kInt8,
                DType::kInt8,
                DType::kBFloat16,
                ScaleShape::kVector,
                ScaleShape::kVector,
                DType::kInt8,
                false,
                true};
  for (const int64_t m : {int64_t{1}, int64_t{64}}) {
    const uint64_t t = tag++;
    QCall q = q_call(comm, c, t, m, 64, 512);
    q.packed = std::make_shared<commfuse::PackedWeight>(q.x2, m * R);
    q.o.packed_x2 = q.packed.get();
    commfuse::AllGatherMatmulPlan plan(q.x1, q.x2, comm.name(), R, q.out, q.gv, q.o);
    const bool reads = plan.description().find("x2 prepacked (PackedWeight)") != std::string::npos;
    // The form is made for the call's m·R rows, the chunks' own count here: read wherever
    // made, except by the direct kernel of a few rows without VNNI/AMX (x2 in place).
    const bool direct = m * R <= 32 && !commfuse::kernels::cpu::s8_gemm_accumulates_in_int32();
    EXPECT(reads == (q.packed->packed() && !direct),
           "A8W8 m=%lld: packed() %d, but the plan %s it: %s", static_cast<long long>(m),
           q.packed->packed(), reads ? "reads" : "does not read", plan.description().c_str());
    if (comm.rank() == 0)
      std::printf("A8W8 all_gather_matmul %lld rows: %s; the plan %s it\n",
                  static_cast<long long>(m * R), q.packed->description().c_str(),
                  reads ? "reads" : "does not read");
    std::vector<float> ws(plan.workspace_size() / sizeof(float) + 1);
    plan.execute(ws.data(), plan.workspace_size());
    q_check(comm, c, t, m, 64, 512, q);
    // Every rank calls again, whatever its plan reads: the call is collective (a rank that
    // skipped it would meet its peers' next op if `reads` ever differed by rank).
    const auto& impl = q.packed->impl();
    if (reads) std::memset(const_cast<void*>(impl.data()), 0, impl.bytes);
    plan.execute(ws.data(), plan.workspace_size());
    const std::vector<double> got = decode(q.output, c.out);
    EXPECT(!reads || std::all_of(got.begin(), got.end(), [](double v) { return v == 0.0; }),
           "A8W8 m=%lld: zeroing the prepared x2 did not zero the output: x2 was read instead",
           static_cast<long long>(m));
  }
}

}  // namespace

void check_quant_all_gather_matmul(commfuse::Comm& comm, uint64_t& tag) {
  check_quant_plan_cache(comm, tag);
  check_int8_packed_read(comm, tag);
  const int64_t k = 64, n = 24;
  const DType e4 = DType::kFloat8E4M3FN, e5 = DType::kFloat8E5M2, h8 = DType::kHiFloat8;
  const DType i8 = DType::kInt8, f32 = DType::kFloat32, f16 = DType::kFloat16,
              bf16 = DType::kBFloat16;
  using S = ScaleShape;
  // A8W8: every scale shape, each bias kind, each output dtype, the full int8 range.
  run_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32}, tag++, 5, k, n);
  run_case(comm, {i8, i8, f16, S::kColumn, S::kColumn, DType::kInt32, true}, tag++, 5, k, n);
  run_case(comm, {i8, i8, f32, S::kTensor, S::kTensor, bf16, false, true}, tag++, 5, k, n);
  run_case(comm, {i8, i8, bf16, S::kAbsent, S::kVector, DType::kInt8, true, true, false, 3}, tag++,
           70, k, n);
  run_case(comm, {i8, i8, f32, S::kVector, S::kVector, DType::kInt32, false, true, true, 1}, tag++,
           0, k, n);
  // A8W8 with x2 prepared ahead (PackedWeight): plain and transposed, few and many rows.
  run_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32, false, true, true, 0, true}, tag++, 5,
           k, n);
  run_case(comm, {i8, i8, f16, S::kColumn, S::kTensor, DType::kInt32, true, true, true, 0, true},
           tag++, 100, k, n);
  // FP8 (each pair of formats), HiF8: per-tensor x1 scale, per-tensor or per-channel x2.
  run_case(comm, {e4, e4, bf16, S::kTensor, S::kVector, f32}, tag++, 5, k, n);
  run_case(comm, {e4, e5, f32, S::kAbsent, S::kTensor, bf16, true}, tag++, 5, k, n);
  run_case(comm, {e5, e4, f16, S::kTensor, S::kVector, DType::kInt8, false, false, false, 2}, tag++,
           70, k, n);
  run_case(comm, {e5, e5, bf16, S::kTensor, S::kTensor, f16, true}, tag++, 5, k, n);
  run_case(comm, {h8, h8, bf16, S::kTensor, S::kVector, f32, true}, tag++, 5, k, n);
  run_case(comm, {h8, h8, f32, S::kAbsent, S::kTensor, DType::kInt8, false, false, true, 64}, tag++,
           70, k, n);
  // Staged (plan.cpp: blocks under 8 rows, or an x2 too big to stay in cache) with and
  // without gather_out: the arriving codes are kept, then one product over all rows.
  run_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32, false, true, false}, tag++, 5, k, n);
  run_case(comm, {e5, e4, f32, S::kTensor, S::kVector, f16, true, false, true, 2}, tag++, 5, 1024,
           520);
  run_case(comm, {i8, i8, f16, S::kVector, S::kTensor, DType::kInt32, true, true, false}, tag++, 9,
           1024, 520);
  // Rows of many pieces (the tests' 4 KiB shm slots hold 64 rows of 64 codes).
  run_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32, true, true}, tag++, 300, k, n);
  run_case(comm, {e4, e4, bf16, S::kTensor, S::kVector, f32}, tag++, 300, k, n);
  // FP8/HiF8 blocks decoded in several chunks: a decoded chunk holds at most half an L2 of
  // rows (quant_row_gemm.cpp): fewer than 300 rows of k = 4096 on any L2 below 4.8 MiB.
  run_case(comm, {e4, e5, bf16, S::kTensor, S::kVector, f32}, tag++, 300, 4096, 8);
  run_case(comm, {h8, h8, f32, S::kAbsent, S::kTensor, bf16, true}, tag++, 300, 4096, 8);
  // The decoded x2 packed for the bf16 GEMM where it reads it packed (kernels/cpu/packed_b):
  // a 64-column block and a tail, k not a multiple of the 32-row blocks, several chunks.
  run_case(comm, {e4, e4, bf16, S::kTensor, S::kVector, f32}, tag++, 300, 2050, 100);
  // A8W8 with n = 4096: chunks of 64 rows (1 MiB of int32 sums) over x2 packed once where
  // this CPU's s8 kernel reads a blocked layout and packing pays, a tail chunk, x2
  // transposed too (quant_row_gemm.hpp: int8_packed).
  const int64_t R = comm.world_size();
  if (R <= 2) {
    run_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32}, tag++, 150, 48, 4096);
    run_case(comm, {i8, i8, f16, S::kVector, S::kColumn, DType::kInt32, true}, tag++, 150, 48,
             4096);
    run_reduce_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32}, tag++, 75 * R, 48, 4096,
                    false, false);
    // The same over x2 prepared ahead (PackedWeight).
    run_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32, false, true, true, 0, true}, tag++,
             150, 48, 4096);
    run_case(comm, {i8, i8, f16, S::kVector, S::kColumn, DType::kInt32, true, true, true, 0, true},
             tag++, 150, 48, 4096);
    run_reduce_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32, true, true, true, 0, true},
                    tag++, 75 * R, 48, 4096, true, false);
  }
  // The reducing ops: every mode, scale shape and output dtype; m = 0; many rows.
  const DType none = DType::kInt8;  // no bias
  for (bool ar : {false, true}) {
    run_reduce_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32}, tag++, 3 * R, k, n, ar,
                    false);
    run_reduce_case(comm, {i8, i8, f32, S::kColumn, S::kColumn, bf16, true, false, true, 2}, tag++,
                    4 * R, k, n, ar, ar);
    run_reduce_case(comm, {i8, i8, f16, S::kTensor, S::kTensor, none}, tag++, 2 * R, k, n, ar,
                    false);
    run_reduce_case(comm, {e4, e5, bf16, S::kTensor, S::kVector, f16, true}, tag++, 2 * R, k, n, ar,
                    ar);
    run_reduce_case(comm, {e5, e5, f32, S::kAbsent, S::kTensor, f32}, tag++, 2 * R, k, n, ar,
                    false);
    run_reduce_case(comm, {h8, h8, bf16, S::kTensor, S::kVector, none, false, false, true, 3},
                    tag++, 3 * R, k, n, ar, false);
    run_reduce_case(comm, {i8, i8, bf16, S::kVector, S::kVector, f32}, tag++, 0, k, n, ar, false);
    run_reduce_case(comm, {i8, i8, bf16, S::kVector, S::kTensor, f32, ar, true, true, 0, true},
                    tag++, 70 * R, k, n, ar, false);
    run_reduce_case(comm, {e4, e4, bf16, S::kTensor, S::kVector, f32}, tag++, 100 * R, k, n, ar,
                    false);
  }
}

}  // namespace optest
