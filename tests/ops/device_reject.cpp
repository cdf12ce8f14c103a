// Device tensors through the C++ API (issue 17), the checks a machine without a GPU can make:
//  - every tensor of a call on one device: a tensor elsewhere, or a device that does not
//    exist, is PARAM_INVALID naming the tensor;
//  - the ops the CUDA backend does not run (alltoall_matmul, quant_all_reduce, quantize)
//    reject device tensors as "not supported";
//  - all_gather_matmul, matmul_reduce_scatter and matmul_all_reduce given tensors labeled
//    cuda:0 answer as this build and machine can: PARAM_INVALID "not supported" in a build
//    without CUDA, RUNTIME_ERROR "no usable CUDA device" without a GPU, and with one (this
//    test's buffers are host memory) PARAM_INVALID naming x1's memory;
// and after each rejection the communicator still runs a host all_gather_matmul, whose
// gather_out holds every rank's rows.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/runtime_info.hpp"
#include "numerics.hpp"

namespace optest {
namespace {

using commfuse::Device;
using commfuse::DeviceType;
using commfuse::Status;
using commfuse::TensorView;

constexpr int64_t kM = 2, kK = 8, kN = 4;
constexpr Device kCuda0{DeviceType::kCuda, 0};

template <typename F>
void expect_status(const char* what, Status code, std::initializer_list<const char*> needles,
                   F&& f) {
  try {
    f();
    EXPECT(false, "%s: accepted", what);
  } catch (const commfuse::Error& e) {
    EXPECT(e.code() == code, "%s: status %d, expected %d: %s", what, static_cast<int>(e.code()),
           static_cast<int>(code), e.what());
    for (const char* needle : needles)
      EXPECT(std::strstr(e.what(), needle) != nullptr, "%s: message lacks '%s': %s", what, needle,
             e.what());
  }
}

TensorView on(TensorView t, Device d) {
  t.device = d;
  return t;
}

// The host call that must still work: gather_out = every rank's x1 rows, x1 = rank + 1.
void good_call(commfuse::Comm& comm) {
  const int R = comm.world_size();
  std::vector<float> x1(kM * kK, static_cast<float>(comm.rank() + 1)), x2(kK * kN, 0.5f);
  std::vector<float> out(static_cast<size_t>(kM * R * kN)),
      gathered(static_cast<size_t>(kM * R * kK));
  commfuse::all_gather_matmul(TensorView(x1.data(), DType::kFloat32, {kM, kK}),
                              TensorView(x2.data(), DType::kFloat32, {kK, kN}), comm.name(), R,
                              TensorView(out.data(), DType::kFloat32, {kM * R, kN}),
                              TensorView(gathered.data(), DType::kFloat32, {kM * R, kK}));
  for (int s = 0; s < R; ++s)
    EXPECT(gathered[static_cast<size_t>(s * kM * kK)] == static_cast<float>(s + 1) &&
               out[static_cast<size_t>(s * kM * kN)] == 0.5f * kK * static_cast<float>(s + 1),
           "the host call after a device rejection: rank %d's rows are wrong", s);
}

}  // namespace

int case_device_reject(commfuse::Comm& comm) {
  const int R = comm.world_size();
  const std::string g = comm.name();
  std::vector<float> x1(kM * R * kK, 1.f), x2(kK * kN, 1.f), out(kM * R * kN),
      gathered(kM * R * kK);
  const TensorView vx1(x1.data(), DType::kFloat32, {kM, kK}),
      vx2(x2.data(), DType::kFloat32, {kK, kN});
  const TensorView vout(out.data(), DType::kFloat32, {kM * R, kN});
  const TensorView vgath(gathered.data(), DType::kFloat32, {kM * R, kK});
  const Status inv = Status::kParamInvalid;

  expect_status("x2 on another device", inv,
                {"all_gather_matmul", "x2 is on cuda:0", "x1 is on cpu"},
                [&] { commfuse::all_gather_matmul(vx1, on(vx2, kCuda0), g, R, vout, vgath); });
  good_call(comm);
  expect_status(
      "output on cuda:1", inv, {"matmul_all_reduce", "output is on cuda:1", "cuda:0"}, [&] {
        commfuse::matmul_all_reduce(
            on(vx1, kCuda0), on(vx2, kCuda0), g,
            on(TensorView(out.data(), DType::kFloat32, {kM, kN}), {DeviceType::kCuda, 1}));
      });
  expect_status("device type 7", inv, {"matmul_reduce_scatter", "x1's device (type 7"}, [&] {
    commfuse::matmul_reduce_scatter(
        on(vx1, {static_cast<DeviceType>(7), 0}), vx2, g, R,
        TensorView(out.data(), DType::kFloat32, {kM / R, kN}));
  });
  expect_status("cuda index -1", inv, {"all_gather_matmul", "x1's device (type 1, index -1)"}, [&] {
    commfuse::all_gather_matmul(on(vx1, {DeviceType::kCuda, -1}), vx2, g, R, vout, vgath);
  });
  good_call(comm);

  // Ops the CUDA backend does not run.
  expect_status(
      "alltoall_matmul on cuda", inv, {"alltoall_matmul", "x1 is on cuda:0", "not supported"}, [&] {
        commfuse::alltoall_matmul(on(TensorView(x1.data(), DType::kFloat32, {R, kK}), kCuda0),
                                  TensorView(x2.data(), DType::kFloat32, {kK, kN}), g,
                                  TensorView(out.data(), DType::kFloat32, {R, kN}));
      });
  std::vector<int8_t> codes(static_cast<size_t>(R * 128));
  std::vector<float> scales(static_cast<size_t>(R)), qout(static_cast<size_t>(R * 128));
  expect_status("quant_all_reduce on cuda", inv,
                {"quant_all_reduce", "scales is on cuda:0", "not supported"}, [&] {
                  commfuse::quant_all_reduce(
                      TensorView(codes.data(), DType::kInt8, {R, 128}),
                      on(TensorView(scales.data(), DType::kFloat32, {R, 1}), kCuda0), g,
                      TensorView(qout.data(), DType::kFloat32, {R, 128}));
                });
  expect_status("quantize on cuda", inv, {"quantize", "x is on cuda:0", "not supported"}, [&] {
    commfuse::quantize(on(TensorView(qout.data(), DType::kFloat32, {R, 128}), kCuda0),
                       "per_token_group", TensorView(codes.data(), DType::kInt8, {R, 128}),
                       TensorView(scales.data(), DType::kFloat32, {R, 1}));
  });
  good_call(comm);

  // The three ops the backend runs, every tensor labeled cuda:0 (host memory here).
  namespace kc = commfuse::kernels::cuda;
  const bool built = kc::runtime_info().built, usable = kc::device_available();
  const Status want = !built ? inv : usable ? inv : Status::kRuntimeError;
  const char* needle = !built   ? "built without CUDA"
                       : usable ? "x1 is labeled cuda:0 but its memory is host memory"
                                : "no usable CUDA device";
  expect_status("all_gather_matmul on cuda:0", want, {"all_gather_matmul", needle}, [&] {
    commfuse::all_gather_matmul(on(vx1, kCuda0), on(vx2, kCuda0), g, R, on(vout, kCuda0),
                                on(vgath, kCuda0));
  });
  expect_status("matmul_all_reduce on cuda:0", want, {"matmul_all_reduce", needle}, [&] {
    commfuse::matmul_all_reduce(on(vx1, kCuda0), on(vx2, kCuda0), g,
                                on(TensorView(out.data(), DType::kFloat32, {kM, kN}), kCuda0));
  });
  expect_status("matmul_reduce_scatter on cuda:0", want, {"matmul_reduce_scatter", needle}, [&] {
    commfuse::matmul_reduce_scatter(
        on(TensorView(x1.data(), DType::kFloat32, {kM * R, kK}), kCuda0), on(vx2, kCuda0), g, R,
        on(TensorView(out.data(), DType::kFloat32, {kM, kN}), kCuda0));
  });
  good_call(comm);
  return 0;
}

}  // namespace optest
