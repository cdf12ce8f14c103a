// QuantAllReduce / QuantReduceScatter against the float64 reference of SPEC §4: every
// (x dtype, scale kind, output dtype), 2-D and 3-D x, shapes that make the streams split
// into several pieces (the tests run with 4 KiB shm slots). Inputs are chosen so every fp32
// product and rank-order sum is exact, so results are compared bitwise with the reference
// rounded once; a random-input pass checks the error bound. Outputs must be identical on
// every rank and on a rerun.
#include <commfuse/commfuse.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "quant_cases.hpp"

namespace optest {
namespace {

using commfuse::TensorView;

struct QuantCase {
  DType x;
  bool mx;
  DType out;
  bool three_d;
  int64_t h;
  bool odd_rows = false;  // 2-D all-reduce with rows % R != 0 (one pass: never two phases)
  int64_t blocks = 8;     // 2-D: rows = blocks · R (+ 1 with odd_rows)
};

struct RankInput {
  std::vector<uint8_t> x;       // rows × h codes
  std::vector<uint8_t> scales;  // rows × h/128 floats (K-G) or rows × h/32 E8M0 bytes (MX)
};

int64_t scales_per_row(const QuantCase& c) {
  return c.mx ? c.h / 32 : c.h / 128;
}

// exact: codes are k·2^j (|k| <= 8, j in [-2, 1]; int8: any code) and scales m·2^e with
// small m and e in [-3, 3], so products and sums of up to 8 ranks are exact in fp32.
RankInput make_input(const QuantCase& c, int rank, int64_t rows, bool exact) {
  const uint64_t seed = 1000 + static_cast<uint64_t>(rank) * 7919 + (exact ? 0 : 31);
  RankInput in;
  const size_t n = static_cast<size_t>(rows * c.h);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t hsh = mix(seed, i);
    if (!exact)
      v[i] = (static_cast<float>(hsh) / 2147483648.0f - 1.0f) * (c.x == DType::kInt8 ? 127 : 6);
    else if (c.x == DType::kInt8)
      v[i] = static_cast<float>(static_cast<int>(hsh % 255) - 127);
    else
      v[i] = std::ldexp(static_cast<float>(static_cast<int>(hsh % 17) - 8),
                        static_cast<int>((hsh >> 8) % 4) - 2);
  }
  in.x.resize(n);
  commfuse::convert(v.data(), DType::kFloat32, in.x.data(), c.x, n, true);
  const size_t ns = static_cast<size_t>(rows * scales_per_row(c));
  if (c.mx) {
    in.scales.resize(ns);
    for (size_t i = 0; i < ns; ++i)
      in.scales[i] = static_cast<uint8_t>(127 + static_cast<int>(mix(seed + 1, i) % 7) - 3);
  } else {
    std::vector<float> s(ns);
    for (size_t i = 0; i < ns; ++i) {
      const uint32_t hsh = mix(seed + 1, i);
      s[i] = exact ? std::ldexp(1.0f + 0.25f * static_cast<float>(hsh % 4),
                                static_cast<int>((hsh >> 4) % 7) - 3)
                   : static_cast<float>(hsh) / 4294967296.0f * 0.02f + 1e-4f;
    }
    in.scales.resize(ns * 4);
    std::memcpy(in.scales.data(), s.data(), in.scales.size());
  }
  return in;
}

// SPEC §4: element h of a row uses scale [h // 128] (K-G) or [h // 64, (h // 32) % 2] (MX).
double scale_of(const QuantCase& c, const RankInput& in, int64_t row, int64_t h) {
  if (c.mx) {
    const uint8_t b =
        in.scales[static_cast<size_t>(row * (c.h / 64) * 2 + (h / 64) * 2 + (h / 32) % 2)];
    return std::ldexp(1.0, static_cast<int>(b) - 127);
  }
  float s;
  std::memcpy(&s, in.scales.data() + 4 * static_cast<size_t>(row * (c.h / 128) + h / 128), 4);
  return s;
}

struct Reference {
  std::vector<double> sum;  // rows [row0, row0 + n) of Σ_r dequant(x_r)
  std::vector<double> abs;  // Σ_r |term|, for the error bound
};

Reference reference(const QuantCase& c, const std::vector<RankInput>& all, int64_t row0,
                    int64_t n) {
  Reference ref;
  ref.sum.assign(static_cast<size_t>(n * c.h), 0.0);
  ref.abs.assign(ref.sum.size(), 0.0);
  for (const RankInput& in : all) {
    const std::vector<double> vals = decode(in.x, c.x);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < c.h; ++h) {
        const double t =
            vals[static_cast<size_t>((row0 + i) * c.h + h)] * scale_of(c, in, row0 + i, h);
        ref.sum[static_cast<size_t>(i * c.h + h)] += t;
        ref.abs[static_cast<size_t>(i * c.h + h)] += std::fabs(t);
      }
  }
  return ref;
}

std::string label(const QuantCase& c, bool rs) {
  return std::string(rs ? "quant_reduce_scatter " : "quant_all_reduce ") +
         std::string(commfuse::dtype_name(c.x)) + (c.mx ? " mx" : " kg") + " -> " +
         std::string(commfuse::dtype_name(c.out)) + (c.three_d ? " 3-D" : " 2-D") +
         " H=" + std::to_string(c.h);
}

void run_case(commfuse::Comm& comm, const QuantCase& c, bool rs, bool exact) {
  const int R = comm.world_size(), me = comm.rank();
  // 2-D: (blocks·R, H); 3-D: (2, 3R, H). Both divisible by R for the reduce-scatter.
  const int64_t b = 2, s = 3 * R, rows = c.three_d ? b * s : c.blocks * R + (c.odd_rows ? 1 : 0);
  std::vector<RankInput> all;
  for (int r = 0; r < R; ++r) all.push_back(make_input(c, r, rows, exact));
  const RankInput& mine = all[static_cast<size_t>(me)];
  const int64_t spr = scales_per_row(c);
  const DType sd = c.mx ? DType::kFloat8E8M0 : DType::kFloat32;
  TensorView x = c.three_d ? TensorView(mine.x.data(), c.x, {b, s, c.h})
                           : TensorView(mine.x.data(), c.x, {rows, c.h});
  TensorView sc = c.mx ? (c.three_d ? TensorView(mine.scales.data(), sd, {b, s, c.h / 64, 2})
                                    : TensorView(mine.scales.data(), sd, {rows, c.h / 64, 2}))
                       : (c.three_d ? TensorView(mine.scales.data(), sd, {b, s, spr})
                                    : TensorView(mine.scales.data(), sd, {rows, spr}));
  const int64_t out_rows = rs ? rows / R : rows;
  const int64_t row0 = rs ? me * out_rows : 0;
  std::vector<uint8_t> out(static_cast<size_t>(out_rows * c.h) * elem_bytes(c.out), 0xCD);
  TensorView o = rs ? TensorView(out.data(), c.out, {out_rows, c.h})
                    : (c.three_d ? TensorView(out.data(), c.out, {b, s, c.h})
                                 : TensorView(out.data(), c.out, {rows, c.h}));
  const std::string what = label(c, rs) + (exact ? "" : " random");

  std::vector<float> ws;
  // COMMFUSE_ALGO=<op>:<name> (tests/ops/CMakeLists.txt) forces one; else the list's rule.
  const std::string op = rs ? "quant_reduce_scatter" : "quant_all_reduce";
  const std::string forced = forced_algo(op);
  const bool shm = std::string(comm.transport_name()) == "shm";
  // Off shm, the two phases where they receive fewer bytes: out_bytes·H < (R-1)·H·33/32.
  const bool fewer_bytes = 32 * static_cast<int64_t>(elem_bytes(c.out)) < 33 * (R - 1);
  const bool two_phase = rows % R == 0 && (shm ? R >= 4 : fewer_bytes);
  const std::string want_schedule = !forced.empty() ? forced
                                    : rs            ? "fused_all_to_all_stream"
                                    : two_phase     ? "fused_rs_all_gather"
                                    : shm           ? "fused_gather_stream"
                                                    : "fused_scales_first";
  auto execute = [&](bool check_schedule) {
    auto run = [&](auto&& plan) {
      if (check_schedule)
        EXPECT(std::string(plan.schedule_name()) == want_schedule, "%s: schedule %s, expected %s",
               what.c_str(), plan.schedule_name(), want_schedule.c_str());
      // One float past the vector's start: a workspace aligned for float only, which the op
      // moves to its 64-byte boundary within the size it asked for (ops/common/op_context.hpp);
      // ASan catches a byte used past the end.
      ws.assign((plan.workspace_size() + 3) / 4 + 1, 0.0f);
      plan.execute(ws.data() + 1, plan.workspace_size());
    };
    if (rs)
      run(commfuse::QuantReduceScatterPlan(x, sc, comm.name(), "sum", o));
    else
      run(commfuse::QuantAllReducePlan(x, sc, comm.name(), "sum", o));
  };
  execute(true);

  const Reference ref = reference(c, all, row0, out_rows);
  if (exact) {
    const std::vector<uint8_t> want = round_to(ref.sum, c.out);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (want[i] != out[i] && bad++ == 0) first = i;
    EXPECT(bad == 0, "%s rank %d: %zu bytes differ from the reference, first at byte %zu",
           what.c_str(), me, bad, first);
  } else {
    const std::vector<double> got = decode(out, c.out);
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      // fp32 sum of R rounded products, then one rounding to the output dtype.
      const double bound = (R + 1) * std::ldexp(1.0, -24) * ref.abs[i] +
                           unit_roundoff(c.out) * std::fabs(ref.sum[i]) + 1e-30;
      if (!(std::fabs(got[i] - ref.sum[i]) <= bound) && bad++ < 3)
        std::fprintf(stderr, "%s: element %zu is %.9g, reference %.9g, bound %.3g\n", what.c_str(),
                     i, got[i], ref.sum[i], bound);
    }
    EXPECT(bad == 0, "%s rank %d: %zu elements beyond the bound", what.c_str(), me, bad);
  }

  // A rerun into a dirty output gives the same bits.
  const std::vector<uint8_t> first_run = out;
  std::fill(out.begin(), out.end(), 0x5A);
  execute(true);
  EXPECT(out == first_run, "%s rank %d: a rerun changed the output", what.c_str(), me);

  // Every algorithm of the op's list gives the same bits (SPEC §4: fp32 in rank order, one
  // rounding), also on inputs whose sums round: each one forced in turn.
  if (!exact) {
    std::vector<std::string> algos{"unfused",
                                   rs ? "fused_all_to_all_stream" : "fused_gather_stream"};
    if (!rs) algos.push_back("fused_scales_first");
    if (!rs && rows % R == 0) algos.push_back("fused_rs_all_gather");
    for (const std::string& a : algos) {
      const ScopedAlgo force(op + ":" + a);
      std::fill(out.begin(), out.end(), 0x5A);
      execute(false);
      EXPECT(out == first_run, "%s rank %d: %s gives other bits than %s", what.c_str(), me,
             a.c_str(), want_schedule.c_str());
    }
  }

  if (!rs) {  // all-reduce: the same bits on every rank
    std::vector<uint8_t> gathered(out.size() * static_cast<size_t>(R));
    comm.all_gather(out.data(), gathered.data(), out.size(), DType::kInt8);
    for (int r = 0; r < R; ++r)
      EXPECT(std::memcmp(gathered.data() + r * out.size(), out.data(), out.size()) == 0,
             "%s: rank %d's output differs from rank %d's", what.c_str(), r, me);
  }
}

// Scales 2^(group index) on codes of 1.0: output element h must be R · 2^(h // 32); a scale
// read from a wrong index (e.g. [(h//32)%2, h//64], or h//64) changes it.
void check_mx_index(commfuse::Comm& comm) {
  const int R = comm.world_size();
  const int64_t rows = R, h = 192;
  std::vector<uint8_t> x(static_cast<size_t>(rows * h));
  const float one = 1.0f;
  uint8_t code = 0;
  commfuse::convert(&one, DType::kFloat32, &code, DType::kFloat8E4M3FN, 1);
  std::fill(x.begin(), x.end(), code);
  std::vector<uint8_t> sc(static_cast<size_t>(rows * h / 32));
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<uint8_t>(127 + i % (h / 32));
  std::vector<float> out(static_cast<size_t>(rows * h));
  commfuse::quant_all_reduce(TensorView(x.data(), DType::kFloat8E4M3FN, {rows, h}),
                             TensorView(sc.data(), DType::kFloat8E8M0, {rows, h / 64, 2}),
                             comm.name(), TensorView(out.data(), DType::kFloat32, {rows, h}));
  size_t bad = 0;
  for (int64_t i = 0; i < rows * h; ++i)
    if (out[static_cast<size_t>(i)] !=
        std::ldexp(static_cast<float>(R), static_cast<int>(i % h / 32)))
      ++bad;
  EXPECT(bad == 0, "mx scale index: %zu elements wrong", bad);
}

// With COMMFUSE_NONTEMPORAL_BYTES pinned low (the tests that set it), a float32 output of
// at least that size streams in every plan of its descriptor, the cached ones too (a plan
// bound from the cache once lost the decision and summed in place), unless the two-phase
// schedule runs. The plans' descriptions say so.
void check_streamed_plans(commfuse::Comm& comm) {
  const char* pinned = std::getenv("COMMFUSE_NONTEMPORAL_BYTES");
  if (pinned == nullptr || std::atoll(pinned) <= 0) return;
  const int R = comm.world_size();
  const int64_t h = 128, rows = 8 * static_cast<int64_t>(R);
  if (rows / R * h * 4 < std::atoll(pinned)) return;
  std::vector<uint8_t> x(static_cast<size_t>(rows * h), 0x11);
  std::vector<float> sc(static_cast<size_t>(rows), 1.0f);
  std::vector<float> out(static_cast<size_t>(rows * h));
  const TensorView xv(x.data(), DType::kInt8, {rows, h});
  const TensorView sv(sc.data(), DType::kFloat32, {rows, 1});
  for (bool rs : {false, true})
    for (int i = 0; i < 2; ++i) {  // planned, then from the cache
      const TensorView ov(out.data(), DType::kFloat32, {rs ? rows / R : rows, h});
      const std::string d =
          rs ? commfuse::QuantReduceScatterPlan(xv, sv, comm.name(), "sum", ov).description()
             : commfuse::QuantAllReducePlan(xv, sv, comm.name(), "sum", ov).description();
      const bool two_phase = d.find("fused_rs_all_gather") != std::string::npos;
      const bool unfused = d.find("schedule unfused") != std::string::npos;
      EXPECT(two_phase || unfused || d.find("output streamed") != std::string::npos,
             "plan %d of %s does not stream its float32 output: %s", i,
             rs ? "quant_reduce_scatter" : "quant_all_reduce", d.c_str());
    }
}

}  // namespace

int case_quant_numerics(commfuse::Comm& comm) {
  const DType outs[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  for (DType xd : {DType::kInt8, DType::kHiFloat8, DType::kFloat8E4M3FN, DType::kFloat8E5M2})
    for (bool mx : {false, true}) {
      if (mx && (xd == DType::kInt8 || xd == DType::kHiFloat8)) continue;
      for (DType od : outs)
        for (bool three_d : {false, true})
          for (bool rs : {false, true}) {
            const int64_t h = mx ? (three_d ? 128 : 192) : (three_d ? 256 : 128);
            run_case(comm, {xd, mx, od, three_d, h}, rs, true);
          }
    }
  // Rows wider than a 4 KiB slot's share: the shm all-to-all stream stages them.
  for (bool rs : {false, true}) {
    run_case(comm, {DType::kInt8, false, DType::kFloat32, false, 1024}, rs, true);
    run_case(comm, {DType::kInt8, false, DType::kFloat32, false, 1024}, rs, false);
    run_case(comm, {DType::kFloat8E4M3FN, true, DType::kBFloat16, true, 128}, rs, false);
  }
  // Over MPI a stream's pieces are 1 MiB (comm/mpi/mpi_stream.cpp; shm's test slots are
  // 4 KiB): 1.2 MiB of codes per rank make a piece that starts past row 0, where a row's
  // scales must be found by their offset. R <= 3 keeps it cheap.
  if (std::string(comm.transport_name()) == "mpi" && comm.world_size() <= 3) {
    const int64_t blocks = (1200 + comm.world_size() - 1) / comm.world_size();  // rows of 1 KiB
    run_case(comm, {DType::kInt8, false, DType::kFloat32, false, 1024, false, blocks}, false, true);
    run_case(comm, {DType::kInt8, false, DType::kBFloat16, false, 1024, true, blocks}, false,
             false);
    run_case(comm, {DType::kFloat8E4M3FN, true, DType::kFloat32, false, 1024, false, blocks}, false,
             true);
  }
  // With R >= 4 on shm, rows % R == 0 takes the two-phase schedule; these take one pass.
  for (DType od : outs)
    run_case(comm, {DType::kFloat8E4M3FN, true, od, false, 192, true}, false, true);
  run_case(comm, {DType::kHiFloat8, false, DType::kFloat16, false, 256, true}, false, true);
  check_mx_index(comm);
  check_streamed_plans(comm);
  return 0;
}

// The C entry points run the same plans: identical bits to the C++ call.
int case_quant_c_api(commfuse::Comm& comm) {
  const int R = comm.world_size();
  const int64_t b = 2, s = 2 * R, h = 128;
  const QuantCase c{DType::kFloat8E5M2, true, DType::kBFloat16, true, h};
  const RankInput in = make_input(c, comm.rank(), b * s, true);
  for (bool rs : {false, true}) {
    const int64_t out_rows = rs ? b * s / R : b * s;
    std::vector<uint16_t> want(static_cast<size_t>(out_rows * h)), got(want.size(), 0xFFFF);
    const TensorView x(in.x.data(), c.x, {b, s, h});
    const TensorView sc(in.scales.data(), DType::kFloat8E8M0, {b, s, h / 64, 2});
    const TensorView o = rs ? TensorView(want.data(), c.out, {out_rows, h})
                            : TensorView(want.data(), c.out, {b, s, h});
    if (rs)
      commfuse::quant_reduce_scatter(x, sc, comm.name(), o);
    else
      commfuse::quant_all_reduce(x, sc, comm.name(), o);

    const int64_t xs[] = {b, s, h}, ss[] = {b, s, h / 64, 2}, os2[] = {out_rows, h};
    commfuseTensor_t* tx = commfuseCreateTensor(xs, 3, nullptr, COMMFUSE_FLOAT8_E5M2,
                                                const_cast<uint8_t*>(in.x.data()));
    commfuseTensor_t* ts = commfuseCreateTensor(ss, 4, nullptr, COMMFUSE_FLOAT8_E8M0,
                                                const_cast<uint8_t*>(in.scales.data()));
    commfuseTensor_t* to = rs ? commfuseCreateTensor(os2, 2, nullptr, COMMFUSE_BFLOAT16, got.data())
                              : commfuseCreateTensor(xs, 3, nullptr, COMMFUSE_BFLOAT16, got.data());
    uint64_t wsz = 0;
    commfuseOpExecutor_t* ex = nullptr;
    const commfuseStatus_t st = rs ? commfuseQuantReduceScatterGetWorkspaceSize(
                                         tx, ts, comm.name().c_str(), "sum", to, &wsz, &ex)
                                   : commfuseQuantAllReduceGetWorkspaceSize(
                                         tx, ts, comm.name().c_str(), "sum", to, &wsz, &ex);
    EXPECT(st == COMMFUSE_SUCCESS, "C plan: %s", commfuseGetLastErrorMessage());
    commfuseDestroyTensor(tx);
    commfuseDestroyTensor(ts);
    commfuseDestroyTensor(to);
    if (st != COMMFUSE_SUCCESS) return 1;
    std::vector<float> ws(wsz / 4 + 1);
    const commfuseStatus_t st2 = rs ? commfuseQuantReduceScatter(ws.data(), wsz, ex, nullptr)
                                    : commfuseQuantAllReduce(ws.data(), wsz, ex, nullptr);
    EXPECT(st2 == COMMFUSE_SUCCESS, "C execute: %s", commfuseGetLastErrorMessage());
    EXPECT(got == want, "%s: C API result differs from C++", rs ? "reduce_scatter" : "all_reduce");
  }
  return 0;
}

}  // namespace optest
