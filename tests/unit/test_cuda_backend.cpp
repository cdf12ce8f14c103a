// The CUDA backend's entry points answer clearly in every build: a CPU-only (or sanitizer)
// build says "not supported" with PARAM_INVALID; a CUDA build on a machine without a usable
// GPU says why with RUNTIME_ERROR; with a GPU, the devices are listed. The NCCL exchange's
// choice and loading, too. (The kernels' numerics
// are tests/cuda's, which need the GPU.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/nccl/nccl_gather.hpp"
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

// The exchange CUDA device calls use: CUDA IPC on one host, NCCL across hosts, pinned by
// COMMFUSE_DEVICE_TRANSPORT; ipc across hosts is an argument error.
TEST(CudaBackend, DeviceTransportChoice) {
  namespace nccl = commfuse::comm::nccl;
  const char* old = std::getenv("COMMFUSE_DEVICE_TRANSPORT");
  const std::string saved = old != nullptr ? old : "";
  unsetenv("COMMFUSE_DEVICE_TRANSPORT");
  EXPECT_FALSE(nccl::device_calls_use_nccl(true));
  EXPECT_TRUE(nccl::device_calls_use_nccl(false));
  setenv("COMMFUSE_DEVICE_TRANSPORT", "NCCL", 1);  // any case
  EXPECT_TRUE(nccl::device_calls_use_nccl(true));
  setenv("COMMFUSE_DEVICE_TRANSPORT", "ipc", 1);
  EXPECT_FALSE(nccl::device_calls_use_nccl(true));
  try {
    (void)nccl::device_calls_use_nccl(false);
    ADD_FAILURE() << "ipc across hosts was accepted";
  } catch (const commfuse::Error& e) {
    EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid);
    EXPECT_NE(std::string(e.what()).find("several hosts"), std::string::npos) << e.what();
  }
  setenv("COMMFUSE_DEVICE_TRANSPORT", "tcp", 1);
  EXPECT_THROW((void)nccl::device_calls_use_nccl(true), commfuse::Error);
  if (old != nullptr)
    setenv("COMMFUSE_DEVICE_TRANSPORT", saved.c_str(), 1);
  else
    unsetenv("COMMFUSE_DEVICE_TRANSPORT");
}

// NCCL is loaded at run time: `commfuse info` names its version, or why it is missing. A
// communicator of one rank is made for real; without a usable GPU, NCCL's own initialization
// fails, reported as RUNTIME_ERROR naming the step (a build without CUDA: "not supported").
TEST(CudaBackend, NcclLoadsOrSaysWhy) {
  namespace nccl = commfuse::comm::nccl;
  const std::string why = nccl::nccl_unavailable(), desc = nccl::nccl_describe();
  if (!commfuse::build::have_cuda()) {
    EXPECT_NE(why.find("without CUDA"), std::string::npos) << why;
  } else if (why.empty()) {
    EXPECT_NE(desc.find("libnccl.so.2"), std::string::npos) << desc;
    EXPECT_TRUE(desc[0] >= '2' && desc[0] <= '9') << desc;  // "2.28.9 (...)"
  } else {
    EXPECT_EQ(desc, why);
  }
  int gathers = 0;
  auto all_gather = [&](const std::string& s) {
    ++gathers;
    return std::vector<std::string>{s};
  };
  try {
    nccl::NcclGather g(0, 1, all_gather, 30);
    EXPECT_TRUE(cuda::device_available()) << "NCCL initialized without a usable device";
  } catch (const commfuse::Error& e) {
    const std::string msg = e.what();
    if (!commfuse::build::have_cuda()) {
      EXPECT_EQ(e.code(), commfuse::Status::kParamInvalid);
      EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
    } else {
      // Without a device NCCL's initialization fails; with one it may still (a machine's
      // network or shared memory): either way RUNTIME_ERROR naming the rank and the step.
      EXPECT_EQ(e.code(), commfuse::Status::kRuntimeError) << msg;
      EXPECT_NE(msg.find("NCCL (rank 0)"), std::string::npos) << msg;
      if (why.empty()) {  // loaded: the unique id went through the exchange first
        EXPECT_EQ(gathers, 1);
        EXPECT_NE(msg.find("ncclCommInitRankConfig"), std::string::npos) << msg;
      }
    }
  }
}
