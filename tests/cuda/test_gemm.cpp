// cuBLASLt GEMMs (kernels/cuda/blaslt.hpp) and the quantized-matmul epilogue
// (kernels/cuda/epilogue.hpp) on the GPU: A8W8's int32 products exactly equal to the CPU's,
// the epilogue bit for bit the CPU's (kernels/cpu/dequant.hpp), FP8 products of small
// integers exact, bf16/fp32 products within fp32 accumulation's bound of a float64
// reference; HiF8's (and every 8-bit format's) widening to bf16 (kernels/cuda/decode.hpp)
// against the CPU's decoder, every code, strided; the argument checks everywhere (they need
// no GPU).
//
// A plain program like test_dequant_sum.cpp: exit 0 passed, 1 failed, 77 skipped (no usable
// device); COMMFUSE_REQUIRE_GPU=1 makes a skip a failure.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "core/convert_fast.hpp"
#include "kernels/cpu/dequant.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/decode.hpp"
#include "kernels/cuda/epilogue.hpp"
#include "kernels/cuda/runtime_info.hpp"

using commfuse::DType;
namespace cuda = commfuse::kernels::cuda;
namespace cpu = commfuse::kernels::cpu;

namespace {

using cudatest::ok;
using cudatest::status_of;

// A device copy of a host vector, freed with the object.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { ok(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc"); }
  template <typename T>
  explicit Dev(const std::vector<T>& v) : Dev(v.size() * sizeof(T)) {
    ok(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "copy in");
  }
  ~Dev() { cudaFree(p); }
  template <typename T>
  std::vector<T> get(size_t count) const {
    std::vector<T> v(count);
    ok(cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost), "copy out");
    return v;
  }
};

void check_rejections() {
  cuda::GemmDesc d;
  d.m = 4;
  d.k = 32;
  d.n = 16;
  d.lda = 32;
  d.ldb = 16;
  d.ldc = 16;
  const cudatest::BadCase<cuda::GemmDesc> bad[] = {
      {"int8 with x2 (k, n)",
       [](cuda::GemmDesc& x) { x.ab_dtype = x.b_dtype = DType::kInt8, x.c_dtype = DType::kInt32; },
       "TN kernels"},
      {"int8 -> float32",
       [](cuda::GemmDesc& x) { x.ab_dtype = x.b_dtype = DType::kInt8, x.b_transposed = true; },
       "not supported"},
      {"e5m2 x e5m2",
       [](cuda::GemmDesc& x) {
         x.ab_dtype = x.b_dtype = DType::kFloat8E5M2, x.b_transposed = true, x.ldb = 32;
       },
       "not supported"},
      {"bf16 x fp16", [](cuda::GemmDesc& x) { x.b_dtype = DType::kFloat16; }, "not supported"},
      {"ldc below n", [](cuda::GemmDesc& x) { x.ldc = 8; }, "ldc=8"},
      {"lda below k", [](cuda::GemmDesc& x) { x.lda = 31; }, "lda=31"},
      {"k = 0", [](cuda::GemmDesc& x) { x.k = 0; }, "k=0"},
  };
  cudatest::expect_rejected(d, bad, [](const cuda::GemmDesc& x) {
    float buf[4];
    cuda::gemm(x, buf, buf, buf, nullptr, 0, nullptr);
  });
  cuda::EpilogueDesc e;
  e.m = 2;
  e.n = 4;
  e.ld_acc = e.ld_out = 4;
  float f = 1;
  e.acc = e.a_scale = e.b_scale = &f;
  e.out = &f;
  e.acc_dtype = DType::kFloat32;
  const int32_t ib = 0;
  e.bias_int = &ib;
  std::string msg;
  CHECK(status_of([&] { cuda::quant_epilogue(e, nullptr); }, &msg) ==
                commfuse::Status::kParamInvalid &&
            msg.find("int32 bias") != std::string::npos,
        "int32 bias with float accumulators: '%s'", msg.c_str());
  if (!cuda::device_available()) {
    CHECK(!cuda::blaslt_unavailable().empty(), "no device, yet cuBLASLt reads as usable");
    cuda::GemmDesc x = d;
    const auto st = status_of([&] { cuda::gemm(x, &x, &x, &x, nullptr, 0, nullptr); }, &msg);
    CHECK(st == commfuse::Status::kRuntimeError &&
              msg.find("no usable CUDA device") != std::string::npos,
          "gemm without a device: status %d '%s'", static_cast<int>(st), msg.c_str());
  }
}

// decode_to_bf16: every code of `t` (each of the 256 appears), rows x cols from a strided
// source into a strided destination whose padding must stay untouched; the CPU's decoder
// (commfuse::convert to float32, then to bfloat16: exact) is the reference.
void check_decode(std::mt19937& rng, DType t) {
  constexpr int64_t kRows = 37, kCols = 300, kLdSrc = 301, kLdDst = 305;
  std::vector<uint8_t> codes(static_cast<size_t>(kRows * kLdSrc));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i < 256 ? i : rng());
  std::vector<float> f(codes.size());
  commfuse::convert(codes.data(), t, f.data(), DType::kFloat32, codes.size());
  std::vector<uint16_t> want(static_cast<size_t>(kRows * kLdDst), 0x5A5A);
  for (int64_t i = 0; i < kRows; ++i)
    commfuse::convert(f.data() + i * kLdSrc, DType::kFloat32, want.data() + i * kLdDst,
                      DType::kBFloat16, kCols);
  Dev src(codes), dst(std::vector<uint16_t>(want.size(), 0x5A5A));
  cuda::DecodeBf16Desc d;
  d.code_dtype = t;
  d.rows = kRows;
  d.cols = kCols;
  d.src = src.p;
  d.ld_src = kLdSrc;
  d.dst = static_cast<uint16_t*>(dst.p);
  d.ld_dst = kLdDst;
  std::string msg;
  CHECK(status_of([&] { cuda::decode_to_bf16(d, nullptr); }, &msg) == commfuse::Status::kSuccess,
        "decode_to_bf16 threw: %s", msg.c_str());
  ok(cudaDeviceSynchronize(), "decode");
  const std::vector<uint16_t> got = dst.get<uint16_t>(want.size());
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool nan = (want[i] & 0x7F80) == 0x7F80 && (want[i] & 0x7F) != 0;
    const bool got_nan = (got[i] & 0x7F80) == 0x7F80 && (got[i] & 0x7F) != 0;
    bad += nan ? !got_nan : got[i] != want[i];
  }
  CHECK(bad == 0, "decode_to_bf16 %s: %zu of %zu values differ", commfuse::dtype_name(t).data(),
        bad, want.size());
}

void check_decode_rejections() {
  uint8_t c = 0;
  uint16_t o = 0;
  cuda::DecodeBf16Desc d;
  d.rows = 1;
  d.cols = 1;
  d.src = &c;
  d.ld_src = 1;
  d.dst = &o;
  d.ld_dst = 1;
  const cudatest::BadCase<cuda::DecodeBf16Desc> bad[] = {
      {"float16 codes", [](cuda::DecodeBf16Desc& x) { x.code_dtype = DType::kFloat16; },
       "code_dtype"},
      {"short ld_src", [](cuda::DecodeBf16Desc& x) { x.cols = 2; }, "ld_src=1"},
      {"null dst", [](cuda::DecodeBf16Desc& x) { x.dst = nullptr; }, "dst is null"},
      {"odd dst",
       [](cuda::DecodeBf16Desc& x) { x.dst = reinterpret_cast<uint16_t*>(uintptr_t{3}); },
       "not 2-byte aligned"},
  };
  cudatest::expect_rejected(
      d, bad, [](const cuda::DecodeBf16Desc& x) { cuda::decode_to_bf16(x, nullptr); });
}

// A8W8: int8 x int8 -> int32 on cuBLASLt, exact, then the epilogue to each output dtype.
void check_a8w8(std::mt19937& rng, int64_t m, int64_t k, int64_t n, Dev& ws) {
  std::vector<int8_t> a(static_cast<size_t>(m * k)), bt(static_cast<size_t>(n * k));
  for (auto& v : a) v = static_cast<int8_t>(rng());
  for (auto& v : bt) v = static_cast<int8_t>(rng());
  std::vector<int32_t> want(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += int32_t{a[i * k + p]} * bt[j * k + p];
      want[i * n + j] = s;
    }
  Dev da(a), db(bt), dc(want.size() * 4);
  cuda::GemmDesc d;
  d.m = m, d.k = k, d.n = n;
  d.ab_dtype = d.b_dtype = DType::kInt8;
  d.c_dtype = DType::kInt32;
  d.lda = k, d.ldb = k, d.ldc = n;
  d.b_transposed = true;
  std::string msg;
  CHECK(
      status_of([&] { cuda::gemm(d, da.p, db.p, dc.p, ws.p, cuda::kGemmWorkspaceBytes, nullptr); },
                &msg) == commfuse::Status::kSuccess,
      "A8W8 gemm threw: %s", msg.c_str());
  ok(cudaDeviceSynchronize(), "gemm");
  const auto got = dc.get<int32_t>(want.size());
  CHECK(got == want, "A8W8 %lldx%lldx%lld: int32 products differ from the exact ones",
        static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n));

  std::vector<float> sa(static_cast<size_t>(m)), sb(static_cast<size_t>(n)),
      bias(static_cast<size_t>(n));
  for (auto& v : sa) v = std::ldexp(static_cast<float>(rng() % 9000 + 1000) / 7919.0f, -8);
  for (auto& v : sb) v = static_cast<float>(rng() % 9000 + 1000) / 104729.0f;
  for (auto& v : bias) v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 37.0f;
  std::vector<int32_t> ibias(static_cast<size_t>(n));
  for (auto& v : ibias) v = static_cast<int32_t>(rng() % 200001) - 100000;
  Dev dsa(sa), dsb(sb), dbias(bias), dibias(ibias);
  for (const DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (const int bias_kind : {0, 1, 2, 3}) {  // none, fp32, int32, both
      // Per-row and per-column scales, or (bias_kind 3) one of each for the whole tensor.
      const bool per = bias_kind != 3;
      const size_t es = commfuse::dtype_storage_bytes(out, 1);
      std::vector<uint8_t> ref(static_cast<size_t>(m * n) * es);
      std::vector<float> y(static_cast<size_t>(n));
      for (int64_t i = 0; i < m; ++i) {
        if (bias_kind >= 2) {  // the int32 bias joins the exact sum (SPEC §6)
          for (int64_t j = 0; j < n; ++j) {
            y[j] = static_cast<float>(int64_t{want[i * n + j]} + ibias[j]) *
                   ((per ? sa[i] : sa[0]) * (per ? sb[j] : sb[0]));
            if (bias_kind == 3) y[j] = y[j] + bias[j];
          }
        } else {
          cpu::scale_int_row(want.data() + i * n, sa[i], sb.data(),
                             bias_kind == 1 ? bias.data() : nullptr, y.data(),
                             static_cast<size_t>(n));
        }
        cpu::store_f32_as(y.data(), ref.data() + static_cast<size_t>(i * n) * es, out,
                          static_cast<size_t>(n));
      }
      Dev dout(ref.size());
      cuda::EpilogueDesc e;
      e.m = m, e.n = n;
      e.acc_dtype = DType::kInt32;
      e.acc = dc.p;
      e.ld_acc = n;
      e.a_scale = static_cast<const float*>(dsa.p);
      e.a_per_row = per;
      e.b_scale = static_cast<const float*>(dsb.p);
      e.b_per_column = per;
      e.bias32 = bias_kind == 1 || bias_kind == 3 ? static_cast<const float*>(dbias.p) : nullptr;
      e.bias_int = bias_kind >= 2 ? static_cast<const int32_t*>(dibias.p) : nullptr;
      e.out_dtype = out;
      e.out = dout.p;
      e.ld_out = n;
      CHECK(
          status_of([&] { cuda::quant_epilogue(e, nullptr); }, &msg) == commfuse::Status::kSuccess,
          "epilogue threw: %s", msg.c_str());
      ok(cudaDeviceSynchronize(), "epilogue");
      CHECK(dout.get<uint8_t>(ref.size()) == ref, "epilogue -> %s, bias %d: not the CPU's bits",
            commfuse::dtype_name(out).data(), bias_kind);
    }
}

// The epilogue on fp32 accumulators (FP8/HiF8 products): the CPU's scale_f32_row bits, with
// a per-tensor x1 scale and per-column x2 scales.
void check_f32_epilogue(std::mt19937& rng, int64_t m, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> acc(static_cast<size_t>(m * n)), sb(static_cast<size_t>(n)),
      bias(static_cast<size_t>(n));
  for (auto& v : acc) v = normal(rng);
  for (auto& v : sb) v = std::fabs(normal(rng)) / 1000.0f;
  for (auto& v : bias) v = normal(rng) / 10.0f;
  const std::vector<float> sa = {0.0371f};
  Dev dacc(acc), dsa(sa), dsb(sb), dbias(bias);
  for (const DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (const bool with_bias : {false, true}) {
      const size_t es = commfuse::dtype_storage_bytes(out, 1);
      std::vector<uint8_t> ref(static_cast<size_t>(m * n) * es);
      std::vector<float> y(static_cast<size_t>(n));
      for (int64_t i = 0; i < m; ++i) {
        cpu::scale_f32_row(acc.data() + i * n, sa[0], sb.data(), with_bias ? bias.data() : nullptr,
                           y.data(), static_cast<size_t>(n));
        cpu::store_f32_as(y.data(), ref.data() + static_cast<size_t>(i * n) * es, out,
                          static_cast<size_t>(n));
      }
      Dev dout(ref.size());
      cuda::EpilogueDesc e;
      e.m = m, e.n = n;
      e.acc_dtype = DType::kFloat32;
      e.acc = dacc.p;
      e.ld_acc = n;
      e.a_scale = static_cast<const float*>(dsa.p);
      e.b_scale = static_cast<const float*>(dsb.p);
      e.b_per_column = true;
      e.bias32 = with_bias ? static_cast<const float*>(dbias.p) : nullptr;
      e.out_dtype = out;
      e.out = dout.p;
      e.ld_out = n;
      std::string msg;
      CHECK(
          status_of([&] { cuda::quant_epilogue(e, nullptr); }, &msg) == commfuse::Status::kSuccess,
          "epilogue threw: %s", msg.c_str());
      ok(cudaDeviceSynchronize(), "epilogue");
      CHECK(dout.get<uint8_t>(ref.size()) == ref,
            "fp32 epilogue -> %s, bias %d: not the CPU's bits", commfuse::dtype_name(out).data(),
            with_bias);
    }
}

// Float GEMMs: fp8 of small integers is exact; bf16/fp16/fp32 within fp32 accumulation.
void check_float(std::mt19937& rng, DType t, DType c_type, bool bt, int64_t m, int64_t k, int64_t n,
                 Dev& ws, DType tb = DType::kInt8 /* x2's type; kInt8 = t */) {
  if (tb == DType::kInt8) tb = t;
  const bool fp8 = t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
  std::vector<float> av(static_cast<size_t>(m * k)), bv(static_cast<size_t>(k * n));
  std::uniform_int_distribution<int> small(-8, 8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : av) v = fp8 ? static_cast<float>(small(rng)) : normal(rng);
  for (auto& v : bv) v = fp8 ? static_cast<float>(small(rng)) : normal(rng);
  // Stored operands: the values encoded (exactly for fp8's small integers), read back.
  auto encode = [&](const std::vector<float>& v, DType et, std::vector<uint8_t>& out,
                    std::vector<float>& back) {
    const size_t es = commfuse::dtype_storage_bytes(et, 1);
    out.resize(v.size() * es);
    commfuse::convert(v.data(), DType::kFloat32, out.data(), et, v.size(), false);
    back.resize(v.size());
    commfuse::convert(out.data(), et, back.data(), DType::kFloat32, v.size(), false);
  };
  std::vector<uint8_t> a8, b8;
  std::vector<float> a, b;
  encode(av, t, a8, a);
  std::vector<float> b_stored(bv.size());
  for (int64_t p = 0; p < k; ++p)  // b (k x n) as stored: (n x k) when transposed
    for (int64_t j = 0; j < n; ++j) b_stored[bt ? j * k + p : p * n + j] = bv[p * n + j];
  encode(b_stored, tb, b8, b);
  std::vector<double> want(static_cast<size_t>(m * n)), bound(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, s_abs = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = a[i * k + p], y = b[bt ? j * k + p : p * n + j];
        s += x * y;
        s_abs += std::fabs(x * y);
      }
      want[i * n + j] = s;
      bound[i * n + j] = (static_cast<double>(k) + 2) * std::ldexp(s_abs, -24);
    }
  Dev da(a8), db(b8), dc(static_cast<size_t>(m * n) * commfuse::dtype_storage_bytes(c_type, 1));
  cuda::GemmDesc d;
  d.m = m, d.k = k, d.n = n;
  d.ab_dtype = t;
  d.b_dtype = tb;
  d.c_dtype = c_type;
  d.lda = k, d.ldb = bt ? k : n, d.ldc = n;
  d.b_transposed = bt;
  std::string msg;
  CHECK(
      status_of([&] { cuda::gemm(d, da.p, db.p, dc.p, ws.p, cuda::kGemmWorkspaceBytes, nullptr); },
                &msg) == commfuse::Status::kSuccess,
      "%s gemm threw: %s", commfuse::dtype_name(t).data(), msg.c_str());
  ok(cudaDeviceSynchronize(), "gemm");
  const auto raw =
      dc.get<uint8_t>(static_cast<size_t>(m * n) * commfuse::dtype_storage_bytes(c_type, 1));
  std::vector<float> got(static_cast<size_t>(m * n));
  commfuse::convert(raw.data(), c_type, got.data(), DType::kFloat32, got.size(), false);
  const double out_ulp =
      c_type == DType::kFloat32 ? 0 : std::ldexp(1.0, c_type == DType::kBFloat16 ? -8 : -11);
  for (size_t e = 0; e < got.size(); ++e) {
    const double tol =
        fp8 && c_type == DType::kFloat32 ? 0 : bound[e] + out_ulp * std::fabs(want[e]);
    if (std::fabs(got[e] - want[e]) <= tol) continue;
    CHECK(false, "%s -> %s%s %lldx%lldx%lld: element %zu is %g, want %g (bound %g)",
          commfuse::dtype_name(t).data(), commfuse::dtype_name(c_type).data(),
          bt ? " (x2 transposed)" : "", static_cast<long long>(m), static_cast<long long>(k),
          static_cast<long long>(n), e, static_cast<double>(got[e]), want[e], tol);
    break;
  }
}

}  // namespace

int main() {
  check_rejections();
  check_decode_rejections();
  if (const int rc = cudatest::exit_without_device(); rc >= 0) return rc;
  CHECK(cuda::blaslt_unavailable().empty(), "cuBLASLt unusable: %s",
        cuda::blaslt_unavailable().c_str());
  if (cudatest::g_failures != 0) return 1;
  std::mt19937 rng(17);
  Dev ws(cuda::kGemmWorkspaceBytes);
  check_a8w8(rng, 37, 256, 48, ws);
  check_a8w8(rng, 256, 4096, 128, ws);
  for (const bool bt : {false, true}) {
    check_float(rng, DType::kBFloat16, DType::kFloat32, bt, 64, 512, 96, ws);
    check_float(rng, DType::kBFloat16, DType::kBFloat16, bt, 64, 512, 96, ws);
    check_float(rng, DType::kFloat16, DType::kFloat32, bt, 48, 256, 64, ws);
    check_float(rng, DType::kFloat32, DType::kFloat32, bt, 32, 256, 48, ws);
  }
  check_float(rng, DType::kFloat8E4M3FN, DType::kFloat32, true, 32, 128, 64, ws);
  check_float(rng, DType::kFloat8E4M3FN, DType::kBFloat16, true, 32, 128, 64, ws);
  check_float(rng, DType::kFloat8E4M3FN, DType::kFloat32, true, 32, 128, 64, ws,
              DType::kFloat8E5M2);  // mixed formats
  check_f32_epilogue(rng, 29, 72);
  for (const DType t : {DType::kHiFloat8, DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kInt8})
    check_decode(rng, t);
  std::printf("%s\n", cuda::blaslt_describe().c_str());
  return cudatest::finish("cuBLASLt gemm + epilogue");
}
