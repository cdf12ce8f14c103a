// alltoall_quant_matmul's permute + dynamic per-token quantization on the GPU
// (kernels/cuda/permute_quant.hpp) against the CPU kernels (kernels/cpu/quant_per_token.hpp,
// the smooth multiply of SPEC §3) bit for bit: codes, scales and the permuted copy, for
// bf16 and fp16, Q = 127 and 7, with and without a smooth scale, 1 to 8 source ranks, rows
// holding zeros only, NaNs and infinities; A4W4's permute of int4 rows with their token
// scales (permute_int4) and x2's conversion to cuBLASLt's int8 (n, k) form (weights_to_tn:
// int8 and int4, plain and transposed, tile edges) against the CPU's int4 unpacker; the
// argument checks everywhere.
//
// A plain program: exit 0 passed, 1 failed, 77 skipped (no usable device);
// COMMFUSE_REQUIRE_GPU=1 makes a skip a failure.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "kernels/cpu/quant_per_token.hpp"
#include "kernels/cuda/int_weights.hpp"
#include "kernels/cuda/permute_quant.hpp"
#include "kernels/cuda/runtime_info.hpp"

using commfuse::DType;
namespace cuda = commfuse::kernels::cuda;
namespace cpu = commfuse::kernels::cpu;

namespace {

using cudatest::ok;
using cudatest::status_of;

template <typename T>
T* to_device(const std::vector<T>& v) {
  T* p = nullptr;
  ok(cudaMalloc(&p, v.size() * sizeof(T) + 1), "cudaMalloc");
  ok(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "copy in");
  return p;
}

template <typename T>
std::vector<T> from_device(const T* p, size_t n) {
  std::vector<T> v(n);
  ok(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "copy out");
  return v;
}

std::vector<uint16_t> encode(const std::vector<float>& v, DType t) {
  std::vector<uint16_t> out(v.size());
  commfuse::convert(v.data(), DType::kFloat32, out.data(), t, v.size(), false);
  return out;
}

std::vector<float> widen(const uint16_t* x, size_t n, DType t) {
  std::vector<float> out(n);
  commfuse::convert(x, t, out.data(), DType::kFloat32, n, false);
  return out;
}

void run_case(std::mt19937& rng, DType t, int ranks, int64_t rows, int64_t h, bool smooth,
              int qmax) {
  const int64_t stride = h + 3, len = ranks * h;
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<uint16_t>> src(ranks);
  for (int s = 0; s < ranks; ++s) {
    std::vector<float> v(static_cast<size_t>(rows * stride));
    for (auto& x : v) x = normal(rng);
    for (int64_t j = 0; j < h; ++j) v[static_cast<size_t>(j)] = 0.0f;  // row 0: zeros only...
    if (rows > 2) {
      v[static_cast<size_t>(stride + 1)] = std::numeric_limits<float>::quiet_NaN();     // row 1
      v[static_cast<size_t>(2 * stride + 2)] = std::numeric_limits<float>::infinity();  // row 2
    }
    src[s] = encode(v, t);
  }
  std::vector<float> sm(static_cast<size_t>(len));
  for (auto& x : sm) x = 0.5f + std::fabs(normal(rng)) / 4.0f;
  const std::vector<uint16_t> smooth_bits = encode(sm, t);
  const std::vector<float> smooth_f = widen(smooth_bits.data(), smooth_bits.size(), t);

  // CPU reference: widen each segment (times the smooth scale), then the per-token kernels.
  std::vector<int8_t> want_q(static_cast<size_t>(rows * len));
  std::vector<float> want_s(static_cast<size_t>(rows));
  std::vector<uint16_t> want_perm(static_cast<size_t>(rows * len));
  std::vector<float> v(static_cast<size_t>(len));
  for (int64_t i = 0; i < rows; ++i) {
    for (int s = 0; s < ranks; ++s) {
      const uint16_t* x = src[s].data() + i * stride;
      std::memcpy(want_perm.data() + i * len + s * h, x, static_cast<size_t>(h) * 2);
      const std::vector<float> w = widen(x, static_cast<size_t>(h), t);
      for (int64_t j = 0; j < h; ++j) v[s * h + j] = smooth ? w[j] * smooth_f[s * h + j] : w[j];
    }
    want_s[i] = cpu::quantize_row_per_token(v.data(), v.size(), qmax, want_q.data() + i * len);
  }

  std::vector<uint16_t*> dsrc(ranks);
  std::vector<const void*> psrc(ranks);
  for (int s = 0; s < ranks; ++s) psrc[s] = dsrc[s] = to_device(src[s]);
  uint16_t* dsmooth = to_device(smooth_bits);
  int8_t* dq = to_device(std::vector<int8_t>(want_q.size(), 99));
  float* ds = to_device(std::vector<float>(want_s.size(), -1.0f));
  uint16_t* dperm = to_device(std::vector<uint16_t>(want_perm.size(), 0xFFFF));
  cuda::PermuteQuantDesc d;
  d.x_dtype = t;
  d.ranks = ranks;
  d.src = psrc.data();
  d.src_row_stride = stride;
  d.rows = rows;
  d.h = h;
  d.smooth = smooth ? dsmooth : nullptr;
  d.qmax = qmax;
  d.q = dq;
  d.scales = ds;
  d.permuted = dperm;
  std::string msg;
  CHECK(status_of([&] { cuda::permute_quant(d, nullptr); }, &msg) == commfuse::Status::kSuccess,
        "permute_quant threw: %s", msg.c_str());
  ok(cudaDeviceSynchronize(), "kernel");
  const char* name = commfuse::dtype_name(t).data();
  CHECK(from_device(dq, want_q.size()) == want_q, "%s R=%d Q=%d smooth=%d: codes differ", name,
        ranks, qmax, smooth);
  const auto got_s = from_device(ds, want_s.size());
  CHECK(std::memcmp(got_s.data(), want_s.data(), want_s.size() * 4) == 0,
        "%s R=%d Q=%d smooth=%d: scales differ", name, ranks, qmax, smooth);
  CHECK(from_device(dperm, want_perm.size()) == want_perm, "%s R=%d: permuted copy differs", name,
        ranks);
  for (auto* p : dsrc) cudaFree(p);
  cudaFree(dsmooth);
  cudaFree(dq);
  cudaFree(ds);
  cudaFree(dperm);
}

// The int4 values of packed bytes, by the CPU's unpacker (SPEC §1).
std::vector<int8_t> unpacked(const std::vector<uint8_t>& packed) {
  std::vector<int8_t> v(packed.size() * 2);
  commfuse::unpack_int4(packed.data(), v.data(), v.size());
  return v;
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// permute_int4: R source blocks of `rows` packed rows (h/2 bytes) and their scales.
void int4_case(std::mt19937& rng, int ranks, int64_t rows, int64_t h, bool keep) {
  const int64_t hb = h / 2, len = ranks * h;
  std::vector<std::vector<uint8_t>> src(ranks);
  std::vector<std::vector<float>> scales(ranks);
  std::vector<uint8_t*> dsrc(ranks);
  std::vector<float*> dscales(ranks);
  std::vector<const void*> psrc(ranks);
  std::vector<const float*> pscales(ranks);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int s = 0; s < ranks; ++s) {
    src[s] = random_bytes(rng, static_cast<size_t>(rows * hb));
    scales[s].resize(static_cast<size_t>(rows));
    for (auto& x : scales[s]) x = normal(rng);
    psrc[s] = dsrc[s] = to_device(src[s]);
    pscales[s] = dscales[s] = to_device(scales[s]);
  }
  std::vector<int8_t> want_q(static_cast<size_t>(rows * len));
  std::vector<float> want_s(static_cast<size_t>(rows * ranks));
  std::vector<uint8_t> want_perm(static_cast<size_t>(rows * len / 2));
  for (int64_t i = 0; i < rows; ++i)
    for (int s = 0; s < ranks; ++s) {
      want_s[static_cast<size_t>(i * ranks + s)] = scales[s][static_cast<size_t>(i)];
      const std::vector<int8_t> values = unpacked(src[s]);
      for (int64_t c = 0; c < h; ++c)
        want_q[static_cast<size_t>(i * len + s * h + c)] = values[static_cast<size_t>(i * h + c)];
      std::memcpy(want_perm.data() + i * len / 2 + s * hb, src[s].data() + i * hb,
                  static_cast<size_t>(hb));
    }
  int8_t* dq = to_device(std::vector<int8_t>(want_q.size(), 99));
  float* ds = to_device(std::vector<float>(want_s.size(), -1.0f));
  uint8_t* dperm = to_device(std::vector<uint8_t>(want_perm.size(), 0xAB));
  cuda::PermuteInt4Desc d;
  d.ranks = ranks;
  d.src = psrc.data();
  d.src_scales = pscales.data();
  d.rows = rows;
  d.h = h;
  d.q = dq;
  d.scales = ds;
  d.permuted = keep ? dperm : nullptr;
  std::string msg;
  CHECK(status_of([&] { cuda::permute_int4(d, nullptr); }, &msg) == commfuse::Status::kSuccess,
        "permute_int4 threw: %s", msg.c_str());
  ok(cudaDeviceSynchronize(), "kernel");
  CHECK(from_device(dq, want_q.size()) == want_q, "permute_int4 R=%d h=%ld: codes differ", ranks,
        static_cast<long>(h));
  const auto got_s = from_device(ds, want_s.size());
  CHECK(std::memcmp(got_s.data(), want_s.data(), want_s.size() * 4) == 0,
        "permute_int4 R=%d: scales differ", ranks);
  const auto got_perm = from_device(dperm, want_perm.size());
  CHECK(keep ? got_perm == want_perm : got_perm == std::vector<uint8_t>(want_perm.size(), 0xAB),
        "permute_int4 R=%d keep=%d: permuted bytes differ", ranks, keep);
  for (int s = 0; s < ranks; ++s) {
    cudaFree(dsrc[s]);
    cudaFree(dscales[s]);
  }
  cudaFree(dq);
  cudaFree(ds);
  cudaFree(dperm);
}

// weights_to_tn: dst (n, k) int8 from x2 (k, n) or (n, k), int8 or int4.
// pad: elements between stored rows beyond their length (ld_src; 0: dense).
void weights_case(std::mt19937& rng, DType t, bool transposed, int64_t k, int64_t n,
                  int64_t pad = 0) {
  const bool int4 = t == DType::kInt4;
  const int64_t ld = (transposed ? k : n) + pad, stored = (transposed ? n : k) * ld;
  const std::vector<uint8_t> src =
      random_bytes(rng, static_cast<size_t>(int4 ? stored / 2 : stored));
  const std::vector<int8_t> values =
      int4 ? unpacked(src) : std::vector<int8_t>(src.begin(), src.end());
  std::vector<int8_t> want(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < k; ++c)
      want[static_cast<size_t>(j * k + c)] =
          values[static_cast<size_t>(transposed ? j * ld + c : c * ld + j)];
  uint8_t* dsrc = to_device(src);
  int8_t* ddst = to_device(std::vector<int8_t>(want.size(), 99));
  cuda::WeightsTnDesc d;
  d.src_dtype = t;
  d.src_transposed = transposed;
  d.k = k;
  d.n = n;
  d.src = dsrc;
  d.ld_src = pad != 0 ? ld : 0;
  d.dst = ddst;
  std::string msg;
  CHECK(status_of([&] { cuda::weights_to_tn(d, nullptr); }, &msg) == commfuse::Status::kSuccess,
        "weights_to_tn threw: %s", msg.c_str());
  ok(cudaDeviceSynchronize(), "kernel");
  CHECK(from_device(ddst, want.size()) == want, "weights_to_tn %s t=%d k=%ld n=%ld pad=%ld differs",
        commfuse::dtype_name(t).data(), transposed, static_cast<long>(k), static_cast<long>(n),
        static_cast<long>(pad));
  cudaFree(dsrc);
  cudaFree(ddst);
}

void check_int4_rejections() {
  int8_t q = 0, w = 0;
  float s = 0;
  uint8_t x = 0;
  const void* src[1] = {&x};
  const float* scales[1] = {&s};
  cuda::PermuteInt4Desc d;
  d.ranks = 1;
  d.src = src;
  d.src_scales = scales;
  d.rows = 1;
  d.h = 2;
  d.q = &q;
  d.scales = &s;
  const cudatest::BadCase<cuda::PermuteInt4Desc> bad[] = {
      {"odd h", [](cuda::PermuteInt4Desc& e) { e.h = 3; }, "h=3"},
      {"ranks 65", [](cuda::PermuteInt4Desc& e) { e.ranks = 65; }, "ranks=65"},
      {"null scales", [](cuda::PermuteInt4Desc& e) { e.src_scales = nullptr; },
       "src_scales is null"},
      {"null q", [](cuda::PermuteInt4Desc& e) { e.q = nullptr; }, "q is null"},
  };
  cudatest::expect_rejected(d, bad,
                            [](const cuda::PermuteInt4Desc& e) { cuda::permute_int4(e, nullptr); });
  cuda::WeightsTnDesc wd;
  wd.k = 2;
  wd.n = 2;
  wd.src = &x;
  wd.dst = &w;
  const cudatest::BadCase<cuda::WeightsTnDesc> wbad[] = {
      {"bf16 weights", [](cuda::WeightsTnDesc& e) { e.src_dtype = DType::kBFloat16; }, "src_dtype"},
      {"k 0", [](cuda::WeightsTnDesc& e) { e.k = 0; }, "k=0"},
      {"odd int4 row",
       [](cuda::WeightsTnDesc& e) {
         e.src_dtype = DType::kInt4;
         e.n = 3;
       },
       "even row length"},
      {"short ld_src", [](cuda::WeightsTnDesc& e) { e.ld_src = 1; }, "ld_src=1"},
      {"odd int4 ld_src",
       [](cuda::WeightsTnDesc& e) {
         e.src_dtype = DType::kInt4;
         e.ld_src = 3;
       },
       "ld_src=3"},
      {"null dst", [](cuda::WeightsTnDesc& e) { e.dst = nullptr; }, "dst is null"},
  };
  cudatest::expect_rejected(wd, wbad,
                            [](const cuda::WeightsTnDesc& e) { cuda::weights_to_tn(e, nullptr); });
}

void check_rejections() {
  int8_t q = 0;
  float s = 0;
  uint16_t x = 0;
  const void* src[1] = {&x};
  cuda::PermuteQuantDesc d;
  d.ranks = 1;
  d.src = src;
  d.src_row_stride = 8;
  d.rows = 1;
  d.h = 8;
  d.q = &q;
  d.scales = &s;
  const cudatest::BadCase<cuda::PermuteQuantDesc> bad[] = {
      {"float32 input", [](cuda::PermuteQuantDesc& e) { e.x_dtype = DType::kFloat32; }, "x_dtype"},
      {"qmax 15", [](cuda::PermuteQuantDesc& e) { e.qmax = 15; }, "qmax=15"},
      {"ranks 0", [](cuda::PermuteQuantDesc& e) { e.ranks = 0; }, "ranks=0"},
      {"short stride", [](cuda::PermuteQuantDesc& e) { e.src_row_stride = 4; }, "src_row_stride"},
      {"null q", [](cuda::PermuteQuantDesc& e) { e.q = nullptr; }, "q is null"},
  };
  cudatest::expect_rejected(
      d, bad, [](const cuda::PermuteQuantDesc& x) { cuda::permute_quant(x, nullptr); });
  if (!cuda::device_available()) {
    std::string msg;
    const auto st = status_of([&] { cuda::permute_quant(d, nullptr); }, &msg);
    CHECK(st == commfuse::Status::kRuntimeError &&
              msg.find("no usable CUDA device") != std::string::npos,
          "no device: status %d '%s'", static_cast<int>(st), msg.c_str());
  }
}

}  // namespace

int main() {
  check_rejections();
  check_int4_rejections();
  if (const int rc = cudatest::exit_without_device(); rc >= 0) return rc;
  std::mt19937 rng(5);
  int cases = 0;
  for (const DType t : {DType::kBFloat16, DType::kFloat16})
    for (const int ranks : {1, 2, 3, 8})
      for (const bool smooth : {false, true})
        for (const int qmax : {127, 7}) {
          run_case(rng, t, ranks, 7, 200, smooth, qmax);
          ++cases;
        }
  run_case(rng, DType::kBFloat16, 4, 1000, 4096, true, 127);  // rows of 16 Ki elements
  ++cases;
  for (const int ranks : {1, 2, 3, 8})
    for (const bool keep : {false, true}) {
      int4_case(rng, ranks, 7, 200, keep);
      ++cases;
    }
  int4_case(rng, 4, 1000, 4096, true);
  ++cases;
  for (const DType t : {DType::kInt8, DType::kInt4})
    for (const bool transposed : {false, true})
      for (const auto& [k, n] : {std::pair<int64_t, int64_t>{70, 38}, {32, 32}, {4096, 2050}}) {
        weights_case(rng, t, transposed, k, n);
        weights_case(rng, t, transposed, k, n, 6);  // padded rows (a strided x2)
        cases += 2;
      }
  std::printf("permute_quant: %d cases\n", cases);
  return cudatest::finish("permute_quant vs the CPU kernels");
}
