// What the CUDA backend can use here: whether this build contains it, the CUDA runtime it
// was built with, the driver and the devices present. A CPU-only build and a CUDA build on a
// machine without a GPU both say why no device can be used, instead of failing later.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace commfuse::kernels::cuda {

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  size_t memory_bytes = 0;
  int multiprocessors = 0;
};

struct RuntimeInfo {
  bool built = false;               // this library contains the CUDA kernels
  std::string toolkit;              // e.g. "nvcc 13.0, sm_90 + compute_90 PTX"
  int runtime_version = 0;          // CUDART_VERSION style, e.g. 13000
  int driver_version = 0;           // 0: no driver
  int device_count = 0;             // cudaGetDeviceCount: the ordinals 0..device_count-1
  std::vector<DeviceInfo> devices;  // those whose properties could be read
  std::string unavailable;          // empty when a device can be used; else why not
};

// Queried once per process (creates no context beyond what cudaGetDeviceCount does).
const RuntimeInfo& runtime_info();

inline bool device_available() {
  return runtime_info().unavailable.empty();
}

// Unless a device can be used, throws PARAM_INVALID "not supported" (a CPU-only build) or
// RUNTIME_ERROR (no usable device), naming `what`.
void require_device(const char* what);

// "13.0" for 13000.
std::string version_string(int cuda_version);

}  // namespace commfuse::kernels::cuda
