// all_gather_matmul's decomposition on one GPU, before the transport exists: the peer's rows
// copied by the copy engine in chunks on a second stream while the GEMM runs on the local
// rows, then on each peer chunk as its copy's event fires (PyTorch SymmetricMemory's and
// Flux's schedule), against the same total GEMM in one cuBLASLt call (issue 17's target:
// fused >= 90 % of it at m = k = n = 8192 bf16, W = 2) and against copy-then-GEMM.
// Prints one line per variant; exit 77 (skipped) where no CUDA device is usable.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_timing.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/runtime_info.hpp"

using commfuse::DType;
namespace cuda = commfuse::kernels::cuda;

namespace {

using cudabench::median_ms;
using cudabench::ok;

}  // namespace

int main() {
  if (!cuda::device_available() || !cuda::blaslt_unavailable().empty()) {
    std::printf("SKIPPED: %s\n", cuda::device_available()
                                     ? cuda::blaslt_unavailable().c_str()
                                     : cuda::runtime_info().unavailable.c_str());
    return 77;
  }
  constexpr int64_t kM = 8192, kK = 8192, kN = 8192, kRanks = 2, kChunks = 4;
  const int64_t block = kM / kRanks, chunk = block / kChunks;
  const size_t row_bytes = static_cast<size_t>(kK) * 2;
  void *a = nullptr, *peer = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  ok(cudaMalloc(&a, static_cast<size_t>(kM) * row_bytes), "malloc");        // the gathered x1
  ok(cudaMalloc(&peer, static_cast<size_t>(block) * row_bytes), "malloc");  // rank 1's rows
  ok(cudaMalloc(&b, static_cast<size_t>(kK * kN) * 2), "malloc");
  ok(cudaMalloc(&c, static_cast<size_t>(kM * kN) * 2), "malloc");
  ok(cudaMalloc(&ws, cuda::kGemmWorkspaceBytes), "malloc");
  ok(cudaMemset(a, 0x3c, static_cast<size_t>(kM) * row_bytes), "memset");
  ok(cudaMemset(peer, 0x3c, static_cast<size_t>(block) * row_bytes), "memset");
  ok(cudaMemset(b, 0x3c, static_cast<size_t>(kK * kN) * 2), "memset");
  cudaStream_t compute, copy;
  ok(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "stream");
  ok(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), "stream");
  std::vector<cudaEvent_t> arrived(kChunks);
  for (auto& e : arrived) ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  cudaEvent_t start, done;
  ok(cudaEventCreateWithFlags(&start, cudaEventDisableTiming), "event");
  ok(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");

  auto gemm_rows = [&](int64_t row0, int64_t rows, cudaStream_t s) {
    cuda::GemmDesc d;
    d.m = rows, d.k = kK, d.n = kN;
    d.ab_dtype = d.b_dtype = DType::kBFloat16;
    d.c_dtype = DType::kBFloat16;
    d.lda = kK, d.ldb = kN, d.ldc = kN;
    cuda::gemm(d, static_cast<char*>(a) + row0 * static_cast<int64_t>(row_bytes), b,
               static_cast<char*>(c) + row0 * kN * 2, ws, cuda::kGemmWorkspaceBytes, s);
  };
  // The legacy default stream orders against the two non-blocking streams through events.
  const double whole = median_ms([&] { gemm_rows(0, kM, nullptr); }, 10);
  const double unfused = median_ms(
      [&] {
        ok(cudaMemcpyAsync(static_cast<char*>(a) + block * row_bytes, peer, block * row_bytes,
                           cudaMemcpyDeviceToDevice, nullptr),
           "copy");
        gemm_rows(0, kM, nullptr);
      },
      10);
  const double fused = median_ms(
      [&] {
        ok(cudaEventRecord(start, nullptr), "record");
        ok(cudaStreamWaitEvent(copy, start), "wait");
        ok(cudaStreamWaitEvent(compute, start), "wait");
        for (int64_t i = 0; i < kChunks; ++i) {
          const size_t off = static_cast<size_t>(block + i * chunk) * row_bytes;
          ok(cudaMemcpyAsync(static_cast<char*>(a) + off,
                             static_cast<char*>(peer) + i * chunk * row_bytes, chunk * row_bytes,
                             cudaMemcpyDeviceToDevice, copy),
             "copy");
          ok(cudaEventRecord(arrived[i], copy), "record");
        }
        gemm_rows(0, block, compute);  // local rows first: they need no wait
        for (int64_t i = 0; i < kChunks; ++i) {
          ok(cudaStreamWaitEvent(compute, arrived[i]), "wait");
          gemm_rows(block + i * chunk, chunk, compute);
        }
        ok(cudaEventRecord(done, compute), "record");
        ok(cudaStreamWaitEvent(nullptr, done), "wait");
      },
      10);
  const double flop = 2.0 * kM * kK * kN;
  std::printf("# %s, %s; bf16 m=k=n=%lld, W=%lld, %lld chunks per peer block\n",
              cuda::runtime_info().devices.front().name.c_str(), cuda::blaslt_describe().c_str(),
              static_cast<long long>(kM), static_cast<long long>(kRanks),
              static_cast<long long>(kChunks));
  std::printf("%-44s %10s %10s %8s\n", "variant", "ms", "TFLOP/s", "vs GEMM");
  for (const auto& [name, ms] : {std::pair{"GEMM alone (one cuBLASLt call)", whole},
                                 std::pair{"unfused (copy peer rows, then GEMM)", unfused},
                                 std::pair{"fused schedule (local first, chunk events)", fused}})
    std::printf("%-44s %10.3f %10.1f %8.3f\n", name, ms, flop / (ms * 1e9), whole / ms);
  return 0;
}
