// The operators' real device schedules (ops/cuda/device_schedules.hpp) with W = 2 ranks as
// processes sharing one GPU (tests/cuda/ranks.hpp), against what the same GPU does alone:
//  - all_gather_matmul bf16, m = k = n = 8192 split over the 2 ranks (4096 rows each), with
//    gather_out: both ranks' calls together do two 8192^3 GEMMs (each rank multiplies every
//    gathered row by its own x2), so the schedule's throughput is 2 GEMMs / the wall time of
//    both calls, compared with one cuBLASLt call of the whole GEMM alone (issue 17's target:
//    >= 90 %) and with the unfused composition on the same heap (every rank's rows copied
//    into gather_out, then one GEMM over them);
//  - quant_all_reduce int8 K-G, 64 Mi codes per rank, to bf16: the bytes every rank's kernel
//    reads and writes over the wall time of both calls, compared with a device-to-device copy
//    (read + write) of the same 64 MiB alone (target: >= 60 %).
// Wall time: from a host barrier to the end of both ranks' work (each rank synchronizes its
// stream, then a barrier), median of 5 after 2 warm-up calls. Exit 77 where no device is usable.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cuda_timing.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "ops/cuda/device_schedules.hpp"
#include "ranks.hpp"

using commfuse::DType;
namespace kc = commfuse::kernels::cuda;
namespace oc = commfuse::ops::cuda;

namespace {

constexpr int kRanks = 2, kIters = 5, kWarmup = 2;

void* device_buffer(size_t bytes, int fill) {
  void* p = nullptr;
  cudabench::ok(cudaMalloc(&p, bytes), "cudaMalloc");
  cudabench::ok(cudaMemset(p, fill, bytes), "cudaMemset");
  return p;
}

// The median wall time (ms) of `call` made by both ranks at once.
template <typename F>
double wall_ms(cudatest::Meeting& meeting, F&& call) {
  for (int i = 0; i < kWarmup; ++i) call();
  cudabench::ok(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> ms;
  for (int i = 0; i < kIters; ++i) {
    meeting.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    cudabench::ok(cudaDeviceSynchronize(), "synchronize");
    meeting.barrier();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int run_rank(cudatest::Meeting& meeting, int rank) {
  oc::HostExchange ex{[&](const std::string& s) { return meeting.all_gather(s); },
                      [&] { meeting.barrier(); }};
  oc::DeviceContext ctx(rank, kRanks, ex);

  // all_gather_matmul
  constexpr int64_t kM = 8192, kK = 8192, kN = 8192, kRows = kM / kRanks;
  void* x1 = device_buffer(static_cast<size_t>(kRows * kK) * 2, 0x3c);
  void* x2 = device_buffer(static_cast<size_t>(kK * kN) * 2, 0x3c);
  void* out = device_buffer(static_cast<size_t>(kM * kN) * 2, 0);
  void* gathered = device_buffer(static_cast<size_t>(kM * kK) * 2, 0);
  double gemm_alone = 0;
  if (rank == 0) {  // alone on the GPU: rank 1 waits at the barrier below
    void* a = device_buffer(static_cast<size_t>(kM * kK) * 2, 0x3c);
    kc::GemmDesc d;
    d.m = kM, d.k = kK, d.n = kN;
    d.ab_dtype = d.b_dtype = d.c_dtype = DType::kBFloat16;
    d.lda = kK, d.ldb = kN, d.ldc = kN;
    gemm_alone = cudabench::median_ms(
        [&] { kc::gemm(d, a, x2, out, ctx.gemm_workspace(), kc::kGemmWorkspaceBytes, nullptr); },
        kIters);
    cudaFree(a);
  }
  meeting.barrier();
  oc::DeviceMatmul m;
  m.dtype = DType::kBFloat16;
  m.m = kRows, m.k = kK, m.n = kN;
  m.x1 = x1;
  m.x2 = x2;
  m.ld_x2 = kN;
  m.out = out;
  const double agm = wall_ms(meeting, [&] { oc::all_gather_matmul(ctx, m, gathered, nullptr); });
  // Unfused: the all-gather as copies through the same heap, then the whole GEMM.
  const size_t block = static_cast<size_t>(kRows * kK) * 2;
  kc::GemmDesc whole;
  whole.m = kM, whole.k = kK, whole.n = kN;
  whole.ab_dtype = whole.b_dtype = whole.c_dtype = DType::kBFloat16;
  whole.lda = kK, whole.ldb = kN, whole.ldc = kN;
  const double unfused = wall_ms(meeting, [&] {
    const oc::DeviceContext::Half h = ctx.begin_call(block, nullptr);
    cudabench::ok(cudaMemcpyAsync(h.mine, x1, block, cudaMemcpyDeviceToDevice, nullptr), "copy");
    ctx.publish_ready(nullptr);
    ctx.exchange();
    for (int p = 0; p < kRanks; ++p) {
      ctx.wait_ready(p, nullptr);
      cudabench::ok(
          cudaMemcpyAsync(static_cast<char*>(gathered) + block * p, h.part[static_cast<size_t>(p)],
                          block, cudaMemcpyDeviceToDevice, nullptr),
          "copy");
    }
    kc::gemm(whole, gathered, x2, out, ctx.gemm_workspace(), kc::kGemmWorkspaceBytes, nullptr);
    ctx.end_call(nullptr);  // after every use of the context's workspace
  });
  for (void* p : {x1, x2, out, gathered}) cudaFree(p);

  // quant_all_reduce
  constexpr int64_t kQRows = 8192, kH = 8192, kScaleRow = kH / 128 * 4;
  const size_t codes = static_cast<size_t>(kQRows * kH),
               scales = static_cast<size_t>(kQRows * kScaleRow);
  void* x = device_buffer(codes, 1);
  void* s = device_buffer(scales, 0);  // zero scales: the sum's values do not matter here
  void* qout = device_buffer(codes * 2, 0);
  double copy_alone = 0;
  if (rank == 0) {
    void* dst = device_buffer(codes, 0);
    copy_alone = cudabench::median_ms(
        [&] {
          cudabench::ok(cudaMemcpyAsync(dst, x, codes, cudaMemcpyDeviceToDevice, nullptr), "copy");
        },
        kIters);
    cudaFree(dst);
  }
  meeting.barrier();
  oc::DeviceQuantReduce q;
  q.x_dtype = DType::kInt8;
  q.rows = kQRows;
  q.h = kH;
  q.x = x;
  q.scales = s;
  q.scale_row_bytes = kScaleRow;
  q.out_dtype = DType::kBFloat16;
  q.out = qout;
  const double qar = wall_ms(meeting, [&] { oc::quant_reduce(ctx, q, true, nullptr); });
  for (void* p : {x, s, qout}) cudaFree(p);

  if (rank == 0) {
    const double flop = 2.0 * kM * kK * kN;
    std::printf("# %s, %s; W=%d ranks as processes sharing the GPU\n",
                kc::runtime_info().devices.front().name.c_str(), kc::blaslt_describe().c_str(),
                kRanks);
    std::printf("%-58s %10s %12s %8s\n", "case", "ms", "rate", "vs alone");
    std::printf("%-58s %10.3f %9.1f TF %8s\n", "GEMM alone, bf16 8192^3 (one cuBLASLt call)",
                gemm_alone, flop / (gemm_alone * 1e9), "");
    std::printf("%-58s %10.3f %9.1f TF %8.3f\n",
                "all_gather_matmul, both ranks (2 GEMMs of 8192^3 + gather_out)", agm,
                2 * flop / (agm * 1e9), (2 * flop / agm) / (flop / gemm_alone));
    std::printf("%-58s %10.3f %9.1f TF %8.3f\n",
                "unfused: gather copies, then the GEMM, both ranks", unfused,
                2 * flop / (unfused * 1e9), (2 * flop / unfused) / (flop / gemm_alone));
    std::printf("%-58s %10.3f\n", "all_gather_matmul / unfused (time; < 1: fused faster)",
                agm / unfused);
    const double copy_bw = 2.0 * codes / (copy_alone * 1e6);  // GB/s, read + write
    // Both ranks' kernels read every rank's codes and scales and write their bf16 output.
    const double qar_bytes = kRanks * (kRanks * double(codes + scales) + 2.0 * codes);
    std::printf("%-58s %10.3f %9.1f GB/s %6s\n", "device copy alone, 64 MiB (read + write)",
                copy_alone, copy_bw, "");
    std::printf("%-58s %10.3f %9.1f GB/s %6.3f\n",
                "quant_all_reduce int8 K-G 64 Mi -> bf16, both ranks", qar, qar_bytes / (qar * 1e6),
                (qar_bytes / (qar * 1e6)) / copy_bw);
  }
  return 0;
}

}  // namespace

int main() {
  if (const int probe = cudatest::probe_ipc_device(); probe != 0) {
    std::printf("SKIPPED: no device usable by %d processes\n", kRanks);
    return probe;
  }
  return cudatest::run_ranks(kRanks, run_rank) == 0 ? 0 : 1;
}
