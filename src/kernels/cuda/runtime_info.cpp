#include "kernels/cuda/runtime_info.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace commfuse::kernels::cuda {
namespace {

// The oldest architecture this build has code for: the smallest number in the CMake list
// ("90", "80;90", "90-real"); PTX for it also runs on newer GPUs.
int min_architecture() {
  const std::string list = COMMFUSE_CUDA_ARCHS;
  int best = 0;
  for (size_t i = 0; i < list.size();) {
    if (list[i] < '0' || list[i] > '9') {
      ++i;
      continue;
    }
    int v = 0;
    while (i < list.size() && list[i] >= '0' && list[i] <= '9') v = v * 10 + (list[i++] - '0');
    while (i < list.size() && list[i] != ';') ++i;  // "-real" / "-virtual"
    best = best == 0 ? v : std::min(best, v);
  }
  return best;
}

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
  info.device_count = count;
  bool runnable = false;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    info.devices.push_back({p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
    runnable = runnable || p.major * 10 + p.minor >= min_architecture();
  }
  if (info.devices.empty())
    info.unavailable = "no CUDA device present";
  else if (!runnable)  // the kernels would fail with "no kernel image" at their first launch
    info.unavailable = detail::cat(
        "no device of compute capability ", min_architecture() / 10, ".", min_architecture() % 10,
        " or newer (this build's kernels are for ", COMMFUSE_CUDA_ARCHS, ")");
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
