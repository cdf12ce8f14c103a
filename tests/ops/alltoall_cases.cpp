// alltoall_quant_matmul and alltoall_matmul (SPEC §3) on every rank of a real multi-rank job:
// numerics against references, every rejection rule, and the C API.
//
// Quantized combinations: the test quantizes the permuted rows itself with a scalar
// transcription of SPEC §3 (the same fp32 operations, so the same q and s bit for bit as
// the kernel, whose bitwise agreement tests/unit/test_quant_per_token.cpp checks), then
// computes the output in float64 from those q and s. The op's epilogue rounds 3 times in
// fp32 per term (A4W4: 2 per segment plus the R-1 additions) and once to the output dtype:
//   |out - ref| <= u_out·|ref| + (2R + 4)·2^-24·S,  S = Σ_terms |f32(acc)·scales| + |bias|.
// alltoAllOut is compared bitwise with the permuted rows; a permuted row that is zero on
// every rank must give bias-only output (s = 0, no NaN).
#include <commfuse/commfuse.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "numerics.hpp"
#include "ops/common/packed_weight.hpp"

namespace optest {
namespace {

using commfuse::Status;
using commfuse::TensorView;

enum class Combo { kA16W8, kA16W4, kA4W4 };
enum class Bias { kNone, kX1, kF32 };

struct QCase {
  Combo combo = Combo::kA16W8;
  DType x1 = DType::kFloat16;   // A16: activations; A4W4: int4
  DType out = DType::kFloat16;  // A4W4: fp16 or bf16; else = x1
  bool smooth = false, transposed = false, a2a_out = false;
  Bias bias = Bias::kNone;
  int64_t rows = 5, h = 20, n = 12;  // rows per rank = BS / R
  bool packed = false;               // A16W8 / A16W4: x2 also passed prepared ahead (packed_x2)
};

std::string describe(const QCase& c) {
  const char* names[] = {"A16W8", "A16W4", "A4W4"};
  return std::string(names[static_cast<int>(c.combo)]) + " x1 " +
         std::string(commfuse::dtype_name(c.x1)) + " out " +
         std::string(commfuse::dtype_name(c.out)) + (c.smooth ? " smooth" : "") +
         (c.transposed ? " x2^T" : "") + (c.a2a_out ? " a2a_out" : "") +
         (c.bias == Bias::kNone ? ""
          : c.bias == Bias::kX1 ? " bias"
                                : " bias-f32") +
         " rows " + std::to_string(c.rows) + (c.packed ? " packed_x2" : "");
}

float uniform(uint64_t seed, uint64_t i, float lo, float hi) {
  return lo + (hi - lo) * static_cast<float>(mix(seed, i) >> 8) / 16777216.0f;
}

int iuniform(uint64_t seed, uint64_t i, int lo, int hi) {
  return lo + static_cast<int>(mix(seed, i) % static_cast<uint32_t>(hi - lo + 1));
}

// One rank's inputs. x1 row j of every rank is all zero when j % rows == 1 (so permuted row 1
// is zero everywhere).
struct RankData {
  std::vector<uint8_t> x1;      // (BS, H) encoded
  std::vector<double> x1d;      // decoded (A16) or int4 values (A4W4)
  std::vector<float> token;     // A4W4 (BS,)
  std::vector<int8_t> w;        // logical (K, N) weights
  std::vector<uint8_t> x2;      // stored (maybe transposed, packed)
  std::vector<float> x2_scale;  // (N,)
  std::vector<uint8_t> smooth;  // (K,) x1 dtype
  std::vector<float> smoothf;
  std::vector<uint8_t> bias;
  std::vector<double> biasd;
  DType bias_dtype = DType::kFloat32;
};

RankData make_rank(const QCase& c, int R, int rank, uint64_t tag) {
  RankData d;
  const int64_t bs = c.rows * R, k = c.h * R;
  const uint64_t seed = tag * 100 + static_cast<uint64_t>(rank);
  std::vector<float> x(static_cast<size_t>(bs * c.h));
  for (int64_t j = 0; j < bs; ++j)
    for (int64_t t = 0; t < c.h; ++t) {
      const size_t i = static_cast<size_t>(j * c.h + t);
      if (j % c.rows == 1 && c.rows > 1) {
        x[i] = 0.0f;
      } else if (c.combo == Combo::kA4W4) {
        x[i] = static_cast<float>(iuniform(seed, i, -8, 7));
      } else {
        x[i] = uniform(seed, i, -2.0f, 2.0f);
        if (i % 17 == 0) x[i] *= 8.0f;  // outliers: the row max varies
      }
    }
  d.x1 = encode(x, c.x1);
  if (c.combo == Combo::kA4W4) {
    d.x1d.assign(x.begin(), x.end());
    d.token.resize(static_cast<size_t>(bs));
    for (int64_t j = 0; j < bs; ++j) d.token[j] = uniform(seed + 7, j, 0.01f, 0.1f);
  } else {
    d.x1d = decode(d.x1, c.x1);
  }
  const bool w4 = c.combo != Combo::kA16W8;
  d.w.resize(static_cast<size_t>(k * c.n));
  for (size_t i = 0; i < d.w.size(); ++i)
    d.w[i] =
        static_cast<int8_t>(w4 ? iuniform(seed + 1, i, -8, 7) : iuniform(seed + 1, i, -127, 127));
  std::vector<int8_t> stored = d.w;
  if (c.transposed)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < c.n; ++j) stored[j * k + i] = d.w[i * c.n + j];
  if (w4) {
    d.x2.resize(stored.size() / 2);
    commfuse::pack_int4(stored.data(), d.x2.data(), stored.size());
  } else {
    d.x2.assign(reinterpret_cast<uint8_t*>(stored.data()),
                reinterpret_cast<uint8_t*>(stored.data()) + stored.size());
  }
  d.x2_scale.resize(static_cast<size_t>(c.n));
  for (int64_t j = 0; j < c.n; ++j) d.x2_scale[j] = uniform(seed + 2, j, 0.001f, 0.02f);
  if (c.smooth) {
    std::vector<float> s(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) s[i] = uniform(seed + 3, i, 0.5f, 1.5f);
    d.smooth = encode(s, c.x1);
    const auto sd = decode(d.smooth, c.x1);
    d.smoothf.assign(sd.begin(), sd.end());
  }
  if (c.bias != Bias::kNone) {
    d.bias_dtype = c.bias == Bias::kF32 ? DType::kFloat32 : c.combo == Combo::kA4W4 ? c.out : c.x1;
    std::vector<float> b(static_cast<size_t>(c.n));
    for (int64_t j = 0; j < c.n; ++j) b[j] = uniform(seed + 4, j, -1.0f, 1.0f);
    d.bias = encode(b, d.bias_dtype);
    d.biasd = decode(d.bias, d.bias_dtype);
  }
  return d;
}

// SPEC §3 dynamic per-token quantization, written out: fp32 throughout.
float ref_quantize(const std::vector<float>& v, int Q, std::vector<int>& q) {
  float amax = 0.0f;
  for (float x : v) amax = std::max(amax, std::fabs(x));
  q.assign(v.size(), 0);
  if (amax == 0.0f) return 0.0f;
  const float inv = static_cast<float>(Q) / amax;
  for (size_t i = 0; i < v.size(); ++i) {
    const float t = v[i] * inv;
    float r = std::nearbyint(t);
    r = std::min(std::max(r, -static_cast<float>(Q)), static_cast<float>(Q));
    q[i] = static_cast<int>(r);
  }
  return amax / static_cast<float>(Q);
}

// via_c_api: through the C entry points. every_algo: afterwards each algorithm of the list
// is forced in turn and must give the same bits (the same quantization, an exact integer
// GEMM and the same per-row epilogue).
void run_quant_case(commfuse::Comm& comm, const QCase& c, uint64_t tag, bool via_c_api,
                    bool every_algo = false) {
  const int R = comm.world_size(), me = comm.rank();
  const int64_t bs = c.rows * R, k = c.h * R;
  const RankData mine = make_rank(c, R, me, tag);
  const size_t out_es = elem_bytes(c.out);
  std::vector<uint8_t> out(static_cast<size_t>(c.rows * c.n) * out_es, 0xCD);
  const size_t a2a_bytes = commfuse::dtype_storage_bytes(c.x1, static_cast<size_t>(c.rows * k));
  std::vector<uint8_t> a2a(c.a2a_out ? a2a_bytes : 0, 0xCD);
  const DType x2t = c.combo == Combo::kA16W8 ? DType::kInt8 : DType::kInt4;
  TensorView x1v(const_cast<uint8_t*>(mine.x1.data()), c.x1, {bs, c.h});
  TensorView x2v(const_cast<uint8_t*>(mine.x2.data()), x2t,
                 {c.transposed ? c.n : k, c.transposed ? k : c.n});
  TensorView sv(const_cast<float*>(mine.x2_scale.data()), DType::kFloat32, {c.n});
  TensorView ov(out.data(), c.out, {c.rows, c.n});
  TensorView av = c.a2a_out ? TensorView(a2a.data(), c.x1, {c.rows, k}) : TensorView();
  commfuse::AlltoAllQuantMatmulOptions o;
  o.x1_quant_mode = c.combo == Combo::kA4W4 ? 3 : 7;
  o.transpose_x2 = c.transposed;
  std::optional<TensorView> x1s, bias;
  if (c.combo == Combo::kA4W4)
    x1s = TensorView(const_cast<float*>(mine.token.data()), DType::kFloat32, {bs});
  else if (c.smooth)
    x1s = TensorView(const_cast<uint8_t*>(mine.smooth.data()), c.x1, {k});
  if (c.bias != Bias::kNone)
    bias = TensorView(const_cast<uint8_t*>(mine.bias.data()), mine.bias_dtype, {c.n});
  o.x1_scale = x1s;
  o.bias = bias;
  // x2 prepared ahead: from its (R*H, N) view (transposeX2: the (N, R*H) buffer's .t()).
  std::optional<commfuse::PackedWeight> packed;
  if (c.packed) o.packed_x2 = &packed.emplace(c.transposed ? x2v.t() : x2v, c.rows);
  if (!via_c_api) {
    commfuse::alltoall_quant_matmul(x1v, x2v, sv, comm.name(), ov, av, o);
    const std::vector<uint8_t> first = out;
    for (const char* algo : {"fused", "unfused"}) {
      if (!every_algo) break;
      const ScopedAlgo force(std::string("alltoall_quant_matmul:") + algo);
      std::fill(out.begin(), out.end(), 0x5A);
      commfuse::alltoall_quant_matmul(x1v, x2v, sv, comm.name(), ov, av, o);
      EXPECT(out == first, "%s: forced %s gives other bits", describe(c).c_str(), algo);
    }
  } else {
    auto mk = [](const TensorView& t) -> commfuseTensor_t* {
      if (!t.present()) return nullptr;
      return commfuseCreateTensor(t.shape, static_cast<uint64_t>(t.ndim), t.strides,
                                  static_cast<commfuseDataType>(t.dtype), t.data);
    };
    commfuseTensor_t *tx1 = mk(x1v), *tx2 = mk(x2v), *ts = mk(sv), *to = mk(ov), *ta = mk(av);
    commfuseTensor_t* tpx2 = c.packed ? mk(c.transposed ? x2v.t() : x2v) : nullptr;
    commfusePackedWeight_t* pw = c.packed ? commfuseCreatePackedWeight(tpx2, c.rows) : nullptr;
    EXPECT(!c.packed || pw != nullptr, "C packed weight: %s", commfuseGetLastErrorMessage());
    if (pw != nullptr) commfuseSetTensorPackedWeight(tx2, pw);
    commfuseTensor_t* tb = bias ? mk(*bias) : nullptr;
    commfuseTensor_t* tx1s = x1s ? mk(*x1s) : nullptr;
    const int64_t axes[2] = {-2, -1};
    commfuseIntArray_t* ax = commfuseCreateIntArray(axes, 2);
    uint64_t ws = 0;
    commfuseOpExecutor_t* ex = nullptr;
    commfuseStatus_t st = commfuseAlltoAllQuantMatmulGetWorkspaceSize(
        tx1, tx2, tb, tx1s, ts, nullptr, nullptr, nullptr, comm.name().c_str(), ax, o.x1_quant_mode,
        2, 0, -1, 2, 0, 0, c.transposed ? 1 : 0, to, ta, &ws, &ex);
    EXPECT(st == COMMFUSE_SUCCESS, "C plan: %s", commfuseGetLastErrorMessage());
    std::vector<float> w((ws + 3) / 4);
    st = commfuseAlltoAllQuantMatmul(ws ? w.data() : nullptr, ws, ex, nullptr);
    EXPECT(st == COMMFUSE_SUCCESS, "C run: %s", commfuseGetLastErrorMessage());
    for (auto* t : {tx1, tx2, ts, to, ta, tb, tx1s, tpx2}) commfuseDestroyTensor(t);
    commfuseDestroyPackedWeight(pw);
    commfuseDestroyIntArray(ax);
  }

  // Reference: permuted rows, quantization, float64 GEMM + epilogue.
  std::vector<RankData> all;
  for (int s = 0; s < R; ++s) all.push_back(s == me ? mine : make_rank(c, R, s, tag));
  const std::string what = describe(c) + (via_c_api ? " (C API)" : "");
  if (c.a2a_out) {
    std::vector<uint8_t> want;
    const size_t row_bytes = commfuse::dtype_storage_bytes(c.x1, static_cast<size_t>(c.h));
    for (int64_t i = 0; i < c.rows; ++i)
      for (int s = 0; s < R; ++s) {
        const uint8_t* src = all[s].x1.data() + static_cast<size_t>(me * c.rows + i) * row_bytes;
        want.insert(want.end(), src, src + row_bytes);
      }
    EXPECT(a2a == want, "%s: alltoAllOut differs from the permuted rows", what.c_str());
  }
  const int Q = c.combo == Combo::kA16W8 ? 127 : 7;
  const auto got = decode(out, c.out);
  for (int64_t i = 0; i < c.rows; ++i) {
    // q[s*H + t] and one scale per segment (A16: all segments share the row's scale).
    std::vector<int> q(static_cast<size_t>(k));
    std::vector<double> seg_scale(static_cast<size_t>(R));
    if (c.combo == Combo::kA4W4) {
      for (int s = 0; s < R; ++s) {
        const int64_t src_row = me * c.rows + i;
        for (int64_t t = 0; t < c.h; ++t)
          q[s * c.h + t] = static_cast<int>(all[s].x1d[src_row * c.h + t]);
        seg_scale[s] = all[s].token[src_row];
      }
    } else {
      std::vector<float> v(static_cast<size_t>(k));
      for (int s = 0; s < R; ++s)
        for (int64_t t = 0; t < c.h; ++t) {
          float x = static_cast<float>(all[s].x1d[(me * c.rows + i) * c.h + t]);
          if (c.smooth) x = x * mine.smoothf[s * c.h + t];
          v[s * c.h + t] = x;
        }
      const float sc = ref_quantize(v, Q, q);
      for (int s = 0; s < R; ++s) seg_scale[s] = sc;
    }
    for (int64_t j = 0; j < c.n; ++j) {
      const double b = mine.biasd.empty() ? 0.0 : mine.biasd[j];
      double ref = b, S = std::fabs(b);
      const int nseg = c.combo == Combo::kA4W4 ? R : 1;
      const int64_t seg_k = k / nseg;
      for (int s = 0; s < nseg; ++s) {
        int64_t acc = 0;
        for (int64_t t = s * seg_k; t < (s + 1) * seg_k; ++t)
          acc += int64_t{q[t]} * mine.w[t * c.n + j];
        const double term = static_cast<double>(acc) * mine.x2_scale[j] * seg_scale[s];
        ref += term;
        S += std::fabs(term);
      }
      const double g = got[i * c.n + j];
      const double tol =
          unit_roundoff(c.out) * std::fabs(ref) + (2 * R + 4) * std::ldexp(1.0, -24) * S;
      if (!(std::fabs(g - ref) <= tol)) {
        EXPECT(false, "%s: output (%lld, %lld) is %.9g, reference %.9g, tolerance %.3g",
               what.c_str(), static_cast<long long>(i), static_cast<long long>(j), g, ref, tol);
        return;
      }
    }
  }
}

// view_t: x2 transposed as a view (SPEC §0: an (n, k) buffer viewed as (k, n)) instead of
// transposeX2 over the buffer; the same call.
void run_float_case(commfuse::Comm& comm, DType t, Bias bk, bool transposed, bool a2a_out,
                    int64_t rows, uint64_t tag, bool packed = false, bool view_t = false) {
  const int R = comm.world_size(), me = comm.rank();
  const int64_t h = 12, n = 10, bs = rows * R, k = h * R;
  auto x1_of = [&](int s) {
    return encode(values(tag * 10 + static_cast<uint64_t>(s), static_cast<size_t>(bs * h), false),
                  t);
  };
  const auto x1 = x1_of(me);
  std::vector<float> w =
      values(tag * 10 + 99 + static_cast<uint64_t>(me), static_cast<size_t>(k * n), false);
  std::vector<float> stored = w;
  if (transposed)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) stored[j * k + i] = w[i * n + j];
  const auto x2 = encode(stored, t);
  const DType bt = bk == Bias::kF32 ? DType::kFloat32 : t;
  const auto bias = encode(values(tag + 5, static_cast<size_t>(n), false), bt);
  std::vector<uint8_t> out(static_cast<size_t>(rows * n) * elem_bytes(t), 0xCD);
  std::vector<uint8_t> a2a(a2a_out ? static_cast<size_t>(rows * k) * elem_bytes(t) : 0, 0xCD);
  commfuse::AlltoAllMatmulOptions o;
  o.transpose_x2 = transposed;
  if (bk != Bias::kNone) o.bias = TensorView(const_cast<uint8_t*>(bias.data()), bt, {n});
  const TensorView x2v(const_cast<uint8_t*>(x2.data()), t,
                       {transposed ? n : k, transposed ? k : n});
  std::optional<commfuse::PackedWeight> pw;  // from x2's (R*H, N) view
  if (packed) o.packed_x2 = &pw.emplace(transposed ? x2v.t() : x2v, rows);
  if (view_t) o.transpose_x2 = false;
  commfuse::alltoall_matmul(TensorView(const_cast<uint8_t*>(x1.data()), t, {bs, h}),
                            view_t ? x2v.t() : x2v, comm.name(),
                            TensorView(out.data(), t, {rows, n}),
                            a2a_out ? TensorView(a2a.data(), t, {rows, k}) : TensorView(), o);
  // Integer inputs: exact fp32 sums, so bitwise equal to the exactly rounded reference.
  std::vector<std::vector<double>> xs;
  for (int s = 0; s < R; ++s) xs.push_back(decode(x1_of(s), t));
  const auto wd = decode(encode(w, t), t);
  const auto bd = decode(bias, bt);
  std::vector<double> ref(static_cast<size_t>(rows * n));
  std::vector<uint8_t> want_a2a;
  const size_t rb = static_cast<size_t>(h) * elem_bytes(t);
  for (int64_t i = 0; i < rows; ++i) {
    for (int s = 0; s < R; ++s) {
      const auto src = x1_of(s);
      want_a2a.insert(want_a2a.end(), src.begin() + (me * rows + i) * rb,
                      src.begin() + (me * rows + i + 1) * rb);
    }
    for (int64_t j = 0; j < n; ++j) {
      double acc = bk == Bias::kNone ? 0.0 : bd[j];
      for (int s = 0; s < R; ++s)
        for (int64_t u = 0; u < h; ++u)
          acc += xs[s][(me * rows + i) * h + u] * wd[(s * h + u) * n + j];
      ref[i * n + j] = acc;
    }
  }
  const std::string what = std::string("alltoall_matmul ") + std::string(commfuse::dtype_name(t)) +
                           (transposed ? (view_t ? " x2 transposed view" : " x2^T") : "") +
                           (a2a_out ? " a2a_out" : "") + " rows " + std::to_string(rows) +
                           (packed ? " packed_x2" : "");
  EXPECT(out == round_to(ref, t), "%s: output not bitwise equal to the rounded reference",
         what.c_str());
  if (a2a_out) EXPECT(a2a == want_a2a, "%s: alltoAllOut differs", what.c_str());
}

// The algorithm both ops run: what COMMFUSE_ALGO forces, else fused (the list's first),
// checked on plans of a tiny shape so that a run with one forced (tests/ops/CMakeLists.txt)
// really tests it. The quantized op's name carries its int GEMM path after a space.
// An int8 (A16W8) or int4 (A16W4) x2 prepared ahead (PackedWeight) is what the plan reads
// wherever it says so: zeroing the prepared buffer zeroes the output (no bias), so x2 itself
// was not read.
void check_packed_read(commfuse::Comm& comm, DType x2_dtype) {
  const int R = comm.world_size();
  const int64_t rows = 64, h = 16, k = h * R, n = 512;
  const char* combo = x2_dtype == DType::kInt4 ? "A16W4" : "A16W8";
  std::vector<uint16_t> x1(static_cast<size_t>(rows * R * h)), out(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < x1.size(); ++i)
    x1[i] = static_cast<uint16_t>(0x3F80 + (i % 7) * 0x10);  // bf16 1.0 .. 1.375
  std::vector<int8_t> w(static_cast<size_t>(k * n));
  const int span = x2_dtype == DType::kInt4 ? 15 : 255;  // [-8, 7] or [-127, 127]
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<int8_t>(static_cast<int>(i % static_cast<size_t>(span)) - span / 2);
  std::vector<uint8_t> w4(w.size() / 2);
  if (x2_dtype == DType::kInt4) commfuse::pack_int4(w.data(), w4.data(), w.size());
  std::vector<float> scale(static_cast<size_t>(n), 0.25f);
  const TensorView x2(x2_dtype == DType::kInt4 ? static_cast<void*>(w4.data()) : w.data(), x2_dtype,
                      {k, n});
  const commfuse::PackedWeight packed(x2, rows);
  commfuse::AlltoAllQuantMatmulOptions o;
  o.packed_x2 = &packed;
  commfuse::AlltoAllQuantMatmulPlan plan(
      TensorView(x1.data(), DType::kBFloat16, {rows * R, h}), x2,
      TensorView(scale.data(), DType::kFloat32, {n}), comm.name(),
      TensorView(out.data(), DType::kBFloat16, {rows, n}), TensorView(), o);
  const bool reads = plan.description().find("x2 prepacked (PackedWeight)") != std::string::npos;
  // Made for the rows each rank multiplies, its GEMM blocks' own count: read wherever made.
  EXPECT(reads == packed.packed(), "%s: packed() %d, but the plan %s it: %s", combo,
         packed.packed(), reads ? "reads" : "does not read", plan.description().c_str());
  if (comm.rank() == 0)
    std::printf("%s %lld rows: %s; the plan %s it\n", combo, static_cast<long long>(rows),
                packed.description().c_str(), reads ? "reads" : "does not read");
  std::vector<float> ws(plan.workspace_size() / sizeof(float) + 1);
  plan.execute(ws.data(), plan.workspace_size());
  EXPECT(std::any_of(out.begin(), out.end(), [](uint16_t v) { return (v & 0x7FFF) != 0; }),
         "%s packed: the output is all zero before the prepared x2 was zeroed", combo);
  // Every rank calls again, whatever its plan reads: the call is collective, and `reads`
  // may differ by rank (a GEMM choice made by a timing probe, each process its own).
  if (reads) std::memset(const_cast<void*>(packed.impl().data()), 0, packed.impl().bytes);
  plan.execute(ws.data(), plan.workspace_size());
  EXPECT(
      !reads || std::all_of(out.begin(), out.end(), [](uint16_t v) { return (v & 0x7FFF) == 0; }),
      "%s: zeroing the prepared x2 did not zero the output: x2 was read instead", combo);
}

// alltoall_matmul with a 16-bit x2 packed ahead: read wherever made (for the rows each
// rank multiplies, its GEMM's own count), so zeroing it zeroes the output (no bias). x1 is
// all ones and x2 small integers that differ by row and column, so each output column is
// its own exact column sum: a packed layout read wrongly (transposed, shifted) shows.
void check_alltoall_matmul_packed_read(commfuse::Comm& comm) {
  const int R = comm.world_size();
  const int64_t rows = 64, h = 32, k = h * R, n = 256;
  auto weight = [](int64_t i, int64_t j) { return static_cast<double>((i * 7 + j * 3) % 9 - 4); };
  std::vector<double> wv(static_cast<size_t>(k * n)), colsum(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) {
      wv[static_cast<size_t>(i * n + j)] = weight(i, j);
      colsum[static_cast<size_t>(j)] += weight(i, j);
    }
  const std::vector<uint8_t> wb =
      encode(std::vector<float>(wv.begin(), wv.end()), DType::kBFloat16);
  std::vector<uint16_t> x1(static_cast<size_t>(rows * R * h), 0x3F80), out(rows * n),
      w(static_cast<size_t>(k * n));
  std::memcpy(w.data(), wb.data(), wb.size());
  const TensorView x2(w.data(), DType::kBFloat16, {k, n});
  const commfuse::PackedWeight packed(x2, rows);
  commfuse::AlltoAllMatmulOptions o;
  o.packed_x2 = &packed;
  commfuse::AlltoAllMatmulPlan plan(
      TensorView(x1.data(), DType::kBFloat16, {rows * R, h}), x2, comm.name(),
      TensorView(out.data(), DType::kBFloat16, {rows, n}), TensorView(), o);
  const bool reads = plan.description().find("x2 prepacked (PackedWeight)") != std::string::npos;
  EXPECT(reads == packed.packed(), "alltoall_matmul: packed() %d, but the plan %s it: %s",
         packed.packed(), reads ? "reads" : "does not read", plan.description().c_str());
  if (comm.rank() == 0)
    std::printf("alltoall_matmul %lld rows: %s; the plan %s it\n", static_cast<long long>(rows),
                packed.description().c_str(), reads ? "reads" : "does not read");
  std::vector<float> ws(plan.workspace_size() / sizeof(float) + 1);
  plan.execute(ws.data(), plan.workspace_size());
  const std::vector<double> got =
      decode(std::vector<uint8_t>(reinterpret_cast<uint8_t*>(out.data()),
                                  reinterpret_cast<uint8_t*>(out.data() + out.size())),
             DType::kBFloat16);
  bool exact = true;
  for (size_t i = 0; i < got.size(); ++i) exact = exact && got[i] == colsum[i % n];
  EXPECT(exact, "alltoall_matmul packed: an output differs from its column's exact sum");
  // Every rank calls again (as above: `reads` may differ by rank; on this machine whether a
  // bf16 GEMM runs native or widened is a per-process timing probe, which under load split
  // W = 8 ranks, and a rank that skipped this call met its peers' next op: 361001).
  if (reads) std::memset(const_cast<void*>(packed.impl().data()), 0, packed.impl().bytes);
  plan.execute(ws.data(), plan.workspace_size());
  EXPECT(
      !reads || std::all_of(out.begin(), out.end(), [](uint16_t v) { return (v & 0x7FFF) == 0; }),
      "alltoall_matmul: zeroing the packed x2 did not zero the output: x2 was read instead");
}

void check_alltoall_algorithms(commfuse::Comm& comm) {
  const int R = comm.world_size();
  auto check = [&](const std::string& op, const std::string& got) {
    const std::string want = forced_algo(op).empty() ? "fused" : forced_algo(op);
    EXPECT(got == want || got.rfind(want + " ", 0) == 0, "%s: schedule '%s', expected %s",
           op.c_str(), got.c_str(), want.c_str());
  };
  std::vector<float> f(static_cast<size_t>(4 * R * 8 + 4 * R + 8), 0.0f);
  std::vector<int8_t> w(static_cast<size_t>(4 * R * 8), 0);
  std::vector<float> scale(8, 1.0f);
  std::vector<uint16_t> h(static_cast<size_t>(4 * R + 8), 0);
  check("alltoall_matmul",
        commfuse::AlltoAllMatmulPlan(TensorView(f.data(), DType::kFloat32, {R, 4}),
                                     TensorView(f.data(), DType::kFloat32, {4 * R, 8}), comm.name(),
                                     TensorView(f.data() + 4 * R * 8, DType::kFloat32, {1, 8}))
            .schedule_name());
  check("alltoall_quant_matmul", commfuse::AlltoAllQuantMatmulPlan(
                                     TensorView(h.data(), DType::kFloat16, {R, 4}),
                                     TensorView(w.data(), DType::kInt8, {4 * R, 8}),
                                     TensorView(scale.data(), DType::kFloat32, {8}), comm.name(),
                                     TensorView(h.data() + 4 * R, DType::kFloat16, {1, 8}))
                                     .schedule_name());
}

}  // namespace

int case_alltoall_numerics(commfuse::Comm& comm) {
  const int R = comm.world_size();
  check_alltoall_algorithms(comm);
  check_packed_read(comm, DType::kInt8);
  check_packed_read(comm, DType::kInt4);
  check_alltoall_matmul_packed_read(comm);
  uint64_t tag = 1;
  int idx = 0;
  const Bias biases[] = {Bias::kNone, Bias::kX1, Bias::kF32};
  for (Combo cb : {Combo::kA16W8, Combo::kA16W4, Combo::kA4W4})
    for (DType dt : {DType::kFloat16, DType::kBFloat16})
      for (bool tr : {false, true})
        for (bool sm : {false, true}) {
          if (cb == Combo::kA4W4 && sm) continue;  // no smooth scale in A4W4
          QCase c;
          c.combo = cb;
          c.x1 = cb == Combo::kA4W4 ? DType::kInt4 : dt;
          c.out = dt;
          c.transposed = tr;
          c.smooth = sm;
          c.bias = biases[idx % 3];
          c.a2a_out = idx % 2 == 0;
          ++idx;
          run_quant_case(comm, c, tag++, false);
        }
  // Many rows (> 256, not a multiple of it): pieces gathered into several GEMM chunks.
  if (R <= 4)
    for (Combo cb : {Combo::kA16W8, Combo::kA16W4, Combo::kA4W4}) {
      QCase c;
      c.combo = cb;
      c.x1 = cb == Combo::kA4W4 ? DType::kInt4 : DType::kBFloat16;
      c.out = DType::kBFloat16;
      c.rows = 300;
      c.bias = Bias::kF32;
      c.a2a_out = true;
      c.smooth = cb != Combo::kA4W4;
      run_quant_case(comm, c, tag++, false, true);
    }
  // N = 4096: the fused GEMM runs in blocks of 64 rows (1 MiB of int32 sums, plan.hpp:
  // kEpilogueBytes), each block's epilogue after it, over x2 packed once where this CPU's
  // s8 kernel reads a blocked layout (transposed and not; A4W4: each source segment's rows
  // of x2 packed on their own; the last block of 22 rows reads them packed or plain, as
  // oneDNN's plan for 22 rows asks).
  if (R <= 2)
    for (Combo cb : {Combo::kA16W8, Combo::kA16W4, Combo::kA4W4})
      for (bool tr : {false, true}) {
        QCase c;
        c.combo = cb;
        c.x1 = cb == Combo::kA4W4 ? DType::kInt4 : DType::kBFloat16;
        c.out = DType::kBFloat16;
        c.rows = 150;
        c.h = 24;
        c.n = 4096;
        c.transposed = tr;
        c.bias = Bias::kF32;
        run_quant_case(comm, c, tag++, false, true);
      }
  // A16W8 over x2 prepared ahead (PackedWeight), plain and transposed: few rows, many rows
  // (several GEMM chunks), and N = 4096 (blocks of 64 rows over the prepared layout).
  for (bool tr : {false, true})
    for (const int64_t rows : {int64_t{5}, int64_t{300}}) {
      if (rows > 256 && R > 4) continue;
      QCase c;
      c.x1 = c.out = DType::kBFloat16;
      c.transposed = tr;
      c.rows = rows;
      c.smooth = tr;
      c.bias = tr ? Bias::kX1 : Bias::kF32;
      c.a2a_out = !tr;
      c.packed = true;
      run_quant_case(comm, c, tag++, false, true);
      if (R <= 2) {
        c.rows = 150;
        c.h = 24;
        c.n = 4096;
        run_quant_case(comm, c, tag++, false, true);
      }
    }
  // A16W4 over an int4 x2 prepared ahead (unpacked and packed once), plain and transposed,
  // few and many rows.
  for (bool tr : {false, true})
    for (const int64_t rows : {int64_t{5}, int64_t{300}}) {
      if (rows > 256 && R > 4) continue;
      QCase c;
      c.combo = Combo::kA16W4;
      c.x1 = c.out = DType::kBFloat16;
      c.transposed = tr;
      c.rows = rows;
      c.smooth = !tr;
      c.bias = tr ? Bias::kF32 : Bias::kX1;
      c.packed = true;
      run_quant_case(comm, c, tag++, false, true);
    }
  // A16W8 of few rows with N past the direct int8 kernel's 16-column steps (without VNNI
  // the op runs that kernel on x2 in place, plain and transposed).
  for (bool tr : {false, true}) {
    QCase wide;
    wide.x1 = wide.out = DType::kBFloat16;
    wide.rows = 7;
    wide.n = 40;
    wide.transposed = tr;
    wide.bias = Bias::kF32;
    run_quant_case(comm, wide, tag++, false, true);
  }
  // One row per rank; the C API.
  QCase one;
  one.rows = 1;
  run_quant_case(comm, one, tag++, false, true);
  QCase capi;
  capi.bias = Bias::kF32;
  capi.a2a_out = true;
  capi.smooth = true;
  run_quant_case(comm, capi, tag++, true);
  capi.packed = true;
  for (bool tr : {false, true}) {
    capi.transposed = tr;
    run_quant_case(comm, capi, tag++, true);
  }
  capi.combo = Combo::kA16W4;  // an int4 PackedWeight through commfuseCreatePackedWeight
  run_quant_case(comm, capi, tag++, true);

  idx = 0;
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (bool tr : {false, true}) {
      run_float_case(comm, dt, biases[idx % 3], tr, idx % 2 == 1, 5, tag++);
      ++idx;
    }
  if (R <= 4) run_float_case(comm, DType::kBFloat16, Bias::kX1, false, true, 300, tag++);
  // x2 as a transposed view (it was refused: "x2 must be row-major contiguous").
  run_float_case(comm, DType::kFloat32, Bias::kF32, true, false, 5, tag++, false, true);
  // x2 packed ahead (PackedWeight): every dtype, plain and transposed, few and many rows.
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (bool tr : {false, true}) {
      run_float_case(comm, dt, biases[idx % 3], tr, idx % 2 == 1, 5, tag++, true);
      ++idx;
    }
  if (R <= 4) {
    run_float_case(comm, DType::kBFloat16, Bias::kF32, true, false, 300, tag++, true);
    run_float_case(comm, DType::kBFloat16, Bias::kNone, false, true, 300, tag++, true);
  }
  return 0;
}

}  // namespace optest
