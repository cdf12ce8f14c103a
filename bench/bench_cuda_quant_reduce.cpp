// quant_all_reduce's CUDA kernel (kernels/cuda/quant_reduce.hpp) against a device-to-device
// copy of the same bytes, on one GPU: issue 17's "≥ 60 % of copy bandwidth at 64 MiB".
// Bytes = what the kernel must move: every rank's codes and scales read, the output written
// (R = 2 ranks' blocks, as two ranks sharing the GPU read each other's in place). The copy
// moves the same number of bytes (read + write), so the ratio compares like with like. Both
// are timed as the mean of 20 launches queued back to back (cuda_timing.hpp says why).
// Prints one line per case; exit 77 (skipped) where no CUDA device is usable.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_timing.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "kernels/cuda/runtime_info.hpp"

using commfuse::DType;
namespace cuda = commfuse::kernels::cuda;

namespace {

using cudabench::back_to_back_ms;
using cudabench::ok;

}  // namespace

int main() {
  if (!cuda::device_available()) {
    std::printf("SKIPPED: %s\n", cuda::runtime_info().unavailable.c_str());
    return 77;
  }
  constexpr int kRanks = 2;
  constexpr int64_t kH = 8192;
  std::printf("# %s\n", cuda::runtime_info().devices.front().name.c_str());
  std::printf("%-28s %10s %10s %10s %10s %8s\n", "case (R=2, 64 MiB fp32)", "bytes", "kernel_us",
              "kernel_GB/s", "copy_GB/s", "ratio");
  struct Case {
    const char* name;
    DType x;
    bool mx;
    DType out;
  };
  const Case cases[] = {{"int8 K-G -> float32", DType::kInt8, false, DType::kFloat32},
                        {"int8 K-G -> bfloat16", DType::kInt8, false, DType::kBFloat16},
                        {"hifloat8 K-G -> bfloat16", DType::kHiFloat8, false, DType::kBFloat16},
                        {"e4m3fn MX -> bfloat16", DType::kFloat8E4M3FN, true, DType::kBFloat16}};
  // 16 Mi elements: a 64 MiB fp32 tensor, the size the issue names.
  const int64_t rows = (int64_t{16} << 20) / kH;
  for (const Case& c : cases) {
    const int64_t group = c.mx ? 32 : 128;
    const int64_t scale_row = kH / group * (c.mx ? 1 : 4);
    std::vector<uint8_t*> codes(kRanks), scales(kRanks);
    std::vector<const uint8_t*> pc(kRanks), ps(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      ok(cudaMalloc(&codes[r], static_cast<size_t>(rows * kH)), "malloc");
      ok(cudaMalloc(&scales[r], static_cast<size_t>(rows * scale_row)), "malloc");
      ok(cudaMemset(codes[r], 0x11, static_cast<size_t>(rows * kH)), "memset");
      ok(cudaMemset(scales[r], 0x3C, static_cast<size_t>(rows * scale_row)), "memset");
      pc[r] = codes[r];
      ps[r] = scales[r];
    }
    const size_t out_bytes = commfuse::dtype_storage_bytes(c.out, static_cast<size_t>(rows * kH));
    void* out = nullptr;
    ok(cudaMalloc(&out, out_bytes), "malloc");
    cuda::DequantSumDesc d;
    d.x_dtype = c.x;
    d.mx = c.mx;
    d.ranks = kRanks;
    d.codes = pc.data();
    d.scales = ps.data();
    d.rows = rows;
    d.h = kH;
    d.codes_row_bytes = kH;
    d.scales_row_bytes = scale_row;
    d.out_dtype = c.out;
    d.out = out;
    const double bytes =
        static_cast<double>(kRanks * rows * (kH + scale_row)) + static_cast<double>(out_bytes);
    const double k_ms = back_to_back_ms([&] { cuda::dequant_sum(d, nullptr); }, 20);
    ok(cudaGetLastError(), "kernel");
    // The copy: bytes/2 read and bytes/2 written.
    void *src = nullptr, *dst = nullptr;
    const auto half = static_cast<size_t>(bytes / 2);
    ok(cudaMalloc(&src, half), "malloc");
    ok(cudaMalloc(&dst, half), "malloc");
    const double c_ms = back_to_back_ms(
        [&] { ok(cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice), "copy"); }, 20);
    const double k_gbs = bytes / (k_ms * 1e6), c_gbs = bytes / (c_ms * 1e6);
    std::printf("%-28s %10.0f %10.1f %10.1f %10.1f %8.2f\n", c.name, bytes, k_ms * 1e3, k_gbs,
                c_gbs, k_gbs / c_gbs);
    for (int r = 0; r < kRanks; ++r) {
      cudaFree(codes[r]);
      cudaFree(scales[r]);
    }
    cudaFree(out);
    cudaFree(src);
    cudaFree(dst);
  }
  return 0;
}
