#include "kernels/cuda/runtime_info.hpp"

#include <cuda_runtime_api.h>

#include "core/error.hpp"

namespace commfuse::kernels::cuda {
namespace {

RuntimeInfo query() {
  RuntimeInfo info;
  info.built = true;
  info.toolkit = detail::cat("nvcc ", COMMFUSE_NVCC_VERSION, ", architectures ",
                             COMMFUSE_CUDA_ARCHS, " (machine code + PTX)");
  cudaRuntimeGetVersion(&info.runtime_version);
  if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess) info.driver_version = 0;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.unavailable = detail::cat(cudaGetErrorString(err),
                                   info.driver_version == 0 ? " (no NVIDIA driver loaded)" : "");
    cudaGetLastError();  // clear it: later calls report their own errors
    return info;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    info.devices.push_back({p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
  }
  if (info.devices.empty()) info.unavailable = "no CUDA device present";
  return info;
}

}  // namespace

const RuntimeInfo& runtime_info() {
  static const RuntimeInfo info = query();
  return info;
}

void require_device(const char* what) {
  const RuntimeInfo& info = runtime_info();
  if (!info.unavailable.empty())
    detail::throw_status(Status::kRuntimeError,
                         detail::cat(what, ": no usable CUDA device: ", info.unavailable));
}

std::string version_string(int v) {
  return detail::cat(v / 1000, ".", (v % 1000) / 10);
}

}  // namespace commfuse::kernels::cuda
