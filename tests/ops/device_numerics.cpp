// The operators on CUDA device tensors through the public C++ API (issue 17's "CPU test
// matrix rerun on CUDA"): every op run once on host buffers and once on device copies of the
// same operands, the results compared bit for bit — SPEC §6 A8W8 (exact int32 sums), the
// quantized reductions and the alltoall A16W8 / A16W4 / A4W4 paths are the CPU's bits by
// construction; the float
// ops get operands whose products and sums are exact (multiples of 1/4), so any accumulation order
// gives the same bits. Where no CUDA device is usable (or this build has no CUDA), every rank exits
// 77 before any communication: ctest reports the test skipped.
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "numerics.hpp"

#if COMMFUSE_TEST_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/runtime_info.hpp"
#endif

namespace optest {

#if COMMFUSE_TEST_CUDA
namespace {

using commfuse::Device;
using commfuse::DeviceType;
using commfuse::TensorView;

constexpr Device kCuda0{DeviceType::kCuda, 0};

// Host bytes and their device copy; views over either.
struct Buf {
  std::vector<uint8_t> host;
  void* dev = nullptr;
  explicit Buf(std::vector<uint8_t> bytes) : host(std::move(bytes)) {
    if (cudaMalloc(&dev, host.size() + 1) != cudaSuccess) std::abort();
    cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice);
  }
  Buf(size_t bytes) : Buf(std::vector<uint8_t>(bytes, 0xCD)) {}
  ~Buf() { cudaFree(dev); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  TensorView h(DType t, std::initializer_list<int64_t> shape) {
    return TensorView(host.data(), t, shape);
  }
  TensorView d(DType t, std::initializer_list<int64_t> shape) {
    TensorView v(dev, t, shape);
    v.device = kCuda0;
    return v;
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> b(host.size());
    cudaDeviceSynchronize();
    cudaMemcpy(b.data(), dev, b.size(), cudaMemcpyDeviceToHost);
    return b;
  }
};

// count values, multiples of 1/4 in [-2, 2] (or small ints for int8; any int4), as dtype's
// bytes.
std::vector<uint8_t> values(size_t count, DType t, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(commfuse::dtype_storage_bytes(t, count));
  if (t == DType::kInt4) {
    for (auto& b : out) b = static_cast<uint8_t>(rng());
    return out;
  }
  if (t == DType::kInt8) {
    for (auto& b : out)
      b = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(rng() % 65) - 32));
    return out;
  }
  std::vector<float> f(count);
  for (auto& x : f) x = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 4.f;
  commfuse::convert(f.data(), DType::kFloat32, out.data(), t, count);
  return out;
}

void same(const char* what, int rank, const Buf& out) {
  EXPECT(out.download() == out.host, "rank %d: %s on cuda:0 differs from the host run", rank, what);
}

}  // namespace

int case_device_numerics(commfuse::Comm& comm) {
  namespace kc = commfuse::kernels::cuda;
  if (!kc::device_available()) {
    std::printf("rank %d: device_numerics SKIPPED: %s\n", comm.rank(),
                kc::runtime_info().unavailable.c_str());
    return 77;
  }
  const int r = comm.rank(), R = comm.world_size();
  const std::string g = comm.name();
  const DType bf = DType::kBFloat16;
  const unsigned s = 10u * static_cast<unsigned>(r);
  constexpr int64_t m = 4, k = 64, n = 24;

  {  // all_gather_matmul, bias, gather_out
    Buf x1(values(m * k, bf, s + 1)), x2(values(k * n, bf, s + 2)), bias(values(n, bf, 3));
    Buf out(commfuse::dtype_storage_bytes(bf, m * R * n)),
        gath(commfuse::dtype_storage_bytes(bf, m * R * k));
    commfuse::AllGatherMatmulOptions o;
    o.bias = bias.h(bf, {n});
    commfuse::all_gather_matmul(x1.h(bf, {m, k}), x2.h(bf, {k, n}), g, R, out.h(bf, {m * R, n}),
                                gath.h(bf, {m * R, k}), o);
    o.bias = bias.d(bf, {n});
    commfuse::all_gather_matmul(x1.d(bf, {m, k}), x2.d(bf, {k, n}), g, R, out.d(bf, {m * R, n}),
                                gath.d(bf, {m * R, k}), o);
    same("all_gather_matmul output", r, out);
    same("all_gather_matmul gather_out", r, gath);
  }
  {  // matmul_reduce_scatter, matmul_all_reduce (x2 transposed)
    Buf x1(values(m * R * k, bf, s + 4)), x2(values(n * k, bf, s + 5));
    Buf rs(commfuse::dtype_storage_bytes(bf, m * n)),
        ar(commfuse::dtype_storage_bytes(bf, m * R * n));
    commfuse::matmul_reduce_scatter(x1.h(bf, {m * R, k}), x2.h(bf, {n, k}).t(), g, R,
                                    rs.h(bf, {m, n}));
    commfuse::matmul_all_reduce(x1.h(bf, {m * R, k}), x2.h(bf, {n, k}).t(), g,
                                ar.h(bf, {m * R, n}));
    commfuse::matmul_reduce_scatter(x1.d(bf, {m * R, k}), x2.d(bf, {n, k}).t(), g, R,
                                    rs.d(bf, {m, n}));
    commfuse::matmul_all_reduce(x1.d(bf, {m * R, k}), x2.d(bf, {n, k}).t(), g,
                                ar.d(bf, {m * R, n}));
    same("matmul_reduce_scatter", r, rs);
    same("matmul_all_reduce", r, ar);
  }
  {  // SPEC §6 A8W8 (x2 transposed, per-token and per-channel scales, fp32 bias) -> bf16
    const DType i8 = DType::kInt8, f32 = DType::kFloat32;
    Buf x1(values(m * R * k, i8, s + 12)), x2(values(n * k, i8, s + 13)), bias(values(n, f32, 14));
    std::vector<uint8_t> sa(static_cast<size_t>(m * R) * 4), sb(static_cast<size_t>(n) * 4);
    for (size_t i = 0; i < sa.size(); i += 4) {
      const float f = 0.01f * static_cast<float>(i / 4 + 1 + r);
      std::memcpy(&sa[i], &f, 4);
    }
    for (size_t i = 0; i < sb.size(); i += 4) {
      const float f = 0.02f * static_cast<float>(i / 4 + 1);
      std::memcpy(&sb[i], &f, 4);
    }
    Buf x1s(sa), x2s(sb);
    Buf agm(commfuse::dtype_storage_bytes(bf, m * R * R * n)),
        ar(commfuse::dtype_storage_bytes(bf, m * R * n));
    auto run = [&](bool dev) {
      auto v = [&](Buf& b, DType t, std::initializer_list<int64_t> shape) {
        return dev ? b.d(t, shape) : b.h(t, shape);
      };
      commfuse::AllGatherMatmulOptions o;
      o.bias = v(bias, f32, {n});
      o.x1_scale = v(x1s, f32, {m * R});
      o.x2_scale = v(x2s, f32, {n});
      o.gather_output = false;
      commfuse::all_gather_matmul(v(x1, i8, {m * R, k}), v(x2, i8, {n, k}).t(), g, R,
                                  v(agm, bf, {m * R * R, n}), TensorView(), o);
      commfuse::MatmulReduceOptions q;
      q.bias = o.bias;
      q.x1_scale = o.x1_scale;
      q.x2_scale = o.x2_scale;
      commfuse::matmul_all_reduce(v(x1, i8, {m * R, k}), v(x2, i8, {n, k}).t(), g,
                                  v(ar, bf, {m * R, n}), q);
    };
    run(false);
    run(true);
    same("A8W8 all_gather_matmul", r, agm);
    same("A8W8 matmul_all_reduce", r, ar);
  }
  {  // quant_all_reduce / quant_reduce_scatter, int8 K-G -> bf16
    const int64_t rows = 2 * R, h = 256;
    std::vector<uint8_t> sc(static_cast<size_t>(rows * h / 128) * 4);
    std::mt19937 rng(s + 6);
    for (size_t i = 0; i < sc.size(); i += 4) {
      const float f = 0.001f * static_cast<float>(rng() % 100 + 1);
      std::memcpy(&sc[i], &f, 4);
    }
    Buf x(values(rows * h, DType::kInt8, s + 7)), scales(std::move(sc));
    Buf ar(commfuse::dtype_storage_bytes(bf, rows * h)),
        rs(commfuse::dtype_storage_bytes(bf, 2 * h));
    commfuse::quant_all_reduce(x.h(DType::kInt8, {rows, h}),
                               scales.h(DType::kFloat32, {rows, h / 128}), g, ar.h(bf, {rows, h}));
    commfuse::quant_reduce_scatter(x.h(DType::kInt8, {rows, h}),
                                   scales.h(DType::kFloat32, {rows, h / 128}), g, rs.h(bf, {2, h}));
    commfuse::quant_all_reduce(x.d(DType::kInt8, {rows, h}),
                               scales.d(DType::kFloat32, {rows, h / 128}), g, ar.d(bf, {rows, h}));
    commfuse::quant_reduce_scatter(x.d(DType::kInt8, {rows, h}),
                                   scales.d(DType::kFloat32, {rows, h / 128}), g, rs.d(bf, {2, h}));
    same("quant_all_reduce", r, ar);
    same("quant_reduce_scatter", r, rs);
  }
  {  // alltoall_matmul (bias, all_to_all_out) and alltoall_quant_matmul A16W8 (x2 transposed)
    const int64_t bs = 2 * R, h = 32, kk = h * R;
    Buf x1(values(bs * h, bf, s + 8)), x2(values(kk * n, bf, s + 9)), bias(values(n, bf, 10));
    Buf w8(values(n * kk, DType::kInt8, s + 11)), scale(values(n, DType::kFloat32, 12));
    Buf out(commfuse::dtype_storage_bytes(bf, 2 * n)),
        a2a(commfuse::dtype_storage_bytes(bf, 2 * kk)),
        qout(commfuse::dtype_storage_bytes(bf, 2 * n));
    commfuse::AlltoAllMatmulOptions o;
    o.bias = bias.h(bf, {n});
    commfuse::alltoall_matmul(x1.h(bf, {bs, h}), x2.h(bf, {kk, n}), g, out.h(bf, {2, n}),
                              a2a.h(bf, {2, kk}), o);
    o.bias = bias.d(bf, {n});
    commfuse::alltoall_matmul(x1.d(bf, {bs, h}), x2.d(bf, {kk, n}), g, out.d(bf, {2, n}),
                              a2a.d(bf, {2, kk}), o);
    same("alltoall_matmul", r, out);
    same("alltoall_matmul all_to_all_out", r, a2a);
    commfuse::AlltoAllQuantMatmulOptions q;
    q.transpose_x2 = true;
    q.bias = bias.h(bf, {n});
    commfuse::alltoall_quant_matmul(x1.h(bf, {bs, h}), w8.h(DType::kInt8, {n, kk}),
                                    scale.h(DType::kFloat32, {n}), g, qout.h(bf, {2, n}), {}, q);
    q.bias = bias.d(bf, {n});
    commfuse::alltoall_quant_matmul(x1.d(bf, {bs, h}), w8.d(DType::kInt8, {n, kk}),
                                    scale.d(DType::kFloat32, {n}), g, qout.d(bf, {2, n}), {}, q);
    same("alltoall_quant_matmul A16W8", r, qout);
  }
  {  // alltoall_quant_matmul A16W8 with x2 (R*H, N), A16W4, A4W4 (x2 transposed, fp16 out)
    const int64_t bs = 2 * R, h = 32, kk = h * R;
    const DType f16 = DType::kFloat16, i4 = DType::kInt4, i8 = DType::kInt8;
    Buf x1(values(bs * h, bf, s + 13)), x1q(values(bs * h, i4, s + 14)),
        tokens(values(bs, DType::kFloat32, s + 15)), w8(values(kk * n, i8, s + 16)),
        w4(values(kk * n, i4, s + 17)), scale(values(n, DType::kFloat32, 18)),
        bias(values(n, DType::kFloat32, 19));
    Buf o8(commfuse::dtype_storage_bytes(bf, 2 * n)), o4(commfuse::dtype_storage_bytes(bf, 2 * n)),
        o44(commfuse::dtype_storage_bytes(f16, 2 * n)),
        a2a(commfuse::dtype_storage_bytes(i4, 2 * kk));
    for (const bool dev : {false, true}) {
      auto v = [&](Buf& b, DType t, std::initializer_list<int64_t> shape) {
        return dev ? b.d(t, shape) : b.h(t, shape);
      };
      commfuse::AlltoAllQuantMatmulOptions q;
      q.bias = v(bias, DType::kFloat32, {n});
      commfuse::alltoall_quant_matmul(v(x1, bf, {bs, h}), v(w8, i8, {kk, n}),
                                      v(scale, DType::kFloat32, {n}), g, v(o8, bf, {2, n}), {}, q);
      commfuse::alltoall_quant_matmul(v(x1, bf, {bs, h}), v(w4, i4, {kk, n}),
                                      v(scale, DType::kFloat32, {n}), g, v(o4, bf, {2, n}), {}, q);
      q.transpose_x2 = true;
      q.x1_quant_mode = 3;
      q.x1_scale = v(tokens, DType::kFloat32, {bs});
      commfuse::alltoall_quant_matmul(v(x1q, i4, {bs, h}), v(w4, i4, {n, kk}),
                                      v(scale, DType::kFloat32, {n}), g, v(o44, f16, {2, n}),
                                      v(a2a, i4, {2, kk}), q);
    }
    same("alltoall_quant_matmul A16W8 x2 (R*H, N)", r, o8);
    same("alltoall_quant_matmul A16W4", r, o4);
    same("alltoall_quant_matmul A4W4", r, o44);
    same("alltoall_quant_matmul A4W4 all_to_all_out", r, a2a);
  }
  return 0;
}

#else

int case_device_numerics(commfuse::Comm& comm) {
  std::printf("rank %d: device_numerics SKIPPED: this build has no CUDA backend\n", comm.rank());
  return 77;
}

#endif

}  // namespace optest
