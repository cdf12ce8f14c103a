// The CUDA backend's entry points answer clearly in every build: a CPU-only (or sanitizer)
// build says "not supported" with PARAM_INVALID; a CUDA build on a machine without a usable
// GPU says why with RUNTIME_ERROR; with a GPU, the devices are listed. (The kernels' numerics
// are tests/cuda's, which need the GPU.)
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/build_info.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace cuda = commfuse::kernels::cuda;

TEST(CudaBackend, ReportsWhatItCanUse) {
  const auto& info = cuda::runtime_info();
  EXPECT_EQ(info.built, commfuse::build::have_cuda());
  if (cuda::device_available()) {
    EXPECT_FALSE(info.devices.empty());
    EXPECT_GT(info.driver_version, 0);
    return;
  }
  EXPECT_FALSE(info.unavailable.empty());
  if (info.built) {
    EXPECT_GT(info.runtime_version, 0);
    EXPECT_NE(info.toolkit.find("nvcc"), std::string::npos) << info.toolkit;
  } else {
    EXPECT_NE(info.unavailable.find("without CUDA"), std::string::npos) << info.unavailable;
  }
}

TEST(CudaBackend, KernelWithoutDeviceFailsClearly) {
  if (cuda::device_available()) GTEST_SKIP() << "a CUDA device is usable here (tests/cuda runs)";
  uint8_t byte = 0;
  const uint8_t* ptrs[1] = {&byte};
  cuda::DequantSumDesc d;
  d.x_dtype = commfuse::DType::kInt8;
  d.ranks = 1;
  d.codes = ptrs;
  d.scales = ptrs;
  d.rows = 1;
  d.h = 128;
  d.codes_row_bytes = 128;
  d.scales_row_bytes = 4;
  float out = 0;
  d.out = &out;
  try {
    cuda::dequant_sum(d, nullptr);
    FAIL() << "dequant_sum ran without a usable device";
  } catch (const commfuse::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("dequant_sum (CUDA)"), std::string::npos) << msg;
    if (commfuse::build::have_cuda()) {
      EXPECT_EQ(e.code(), commfuse::Status::kRuntimeError) << msg;
      EXPECT_NE(msg.find("no usable CUDA device"), std::string::npos) << msg;
    } else {
      EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid) << msg;
      EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
    }
  }
}
