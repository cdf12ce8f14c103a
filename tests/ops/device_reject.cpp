// Device tensors through the C++ API (issue 17), the checks a machine without a GPU can make:
//  - every tensor of a call on one device: a tensor elsewhere, or a device that does not
//    exist, is PARAM_INVALID naming the tensor;
//  - quantize, which the CUDA backend does not run, rejects device tensors as "not
//    supported";
//  - all_gather_matmul, matmul_reduce_scatter, matmul_all_reduce, alltoall_matmul,
//    alltoall_quant_matmul (A16W8 with x2 not transposed, A16W4, A4W4), SPEC §6 HiF8 (and
//    quant_all_reduce, which needs no cuBLASLt) given tensors labeled
//    cuda:0 answer as this build and machine can: PARAM_INVALID "not supported" in a build
//    without CUDA, RUNTIME_ERROR "no usable CUDA device" without a GPU (or "cuBLASLt cannot
//    be used" without its library), and with both (this test's buffers are host memory)
//    PARAM_INVALID naming x1's memory;
// and after each rejection the communicator still runs a host all_gather_matmul, whose
// gather_out holds every rank's rows.
#include <commfuse/commfuse.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/blaslt.hpp"
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

// The C API's device label (commfuseSetTensorDevice): its own argument checks, a mixed call,
// and an all-cuda:0 AllGatherMatmul answering `want` / `needle` as the C++ call does.
void c_api_cases(commfuse::Comm& comm, commfuseStatus_t want, const char* needle) {
  const int R = comm.world_size();
  std::vector<float> x1(kM * kK, 1.f), x2(kK * kN, 1.f), out(kM * R * kN), gathered(kM * R * kK);
  const int64_t s1[] = {kM, kK}, s2[] = {kK, kN}, so[] = {kM * R, kN}, sg[] = {kM * R, kK};
  commfuseTensor_t* t1 = commfuseCreateTensor(s1, 2, nullptr, COMMFUSE_FLOAT32, x1.data());
  commfuseTensor_t* t2 = commfuseCreateTensor(s2, 2, nullptr, COMMFUSE_FLOAT32, x2.data());
  commfuseTensor_t* to = commfuseCreateTensor(so, 2, nullptr, COMMFUSE_FLOAT32, out.data());
  commfuseTensor_t* tg = commfuseCreateTensor(sg, 2, nullptr, COMMFUSE_FLOAT32, gathered.data());
  auto expect_c = [](const char* what, commfuseStatus_t got, commfuseStatus_t code,
                     const char* text) {
    EXPECT(got == code, "%s: status %d, expected %d: %s", what, static_cast<int>(got),
           static_cast<int>(code), commfuseGetLastErrorMessage());
    EXPECT(std::strstr(commfuseGetLastErrorMessage(), text) != nullptr,
           "%s: message lacks '%s': %s", what, text, commfuseGetLastErrorMessage());
  };
  expect_c("set device null", commfuseSetTensorDevice(nullptr, COMMFUSE_DEVICE_CUDA, 0),
           COMMFUSE_PARAM_NULLPTR, "tensor is null");
  expect_c("set device type 5", commfuseSetTensorDevice(t1, static_cast<commfuseDeviceType>(5), 0),
           COMMFUSE_PARAM_INVALID, "type 5");
  expect_c("set cuda -1", commfuseSetTensorDevice(t1, COMMFUSE_DEVICE_CUDA, -1),
           COMMFUSE_PARAM_INVALID, "index -1 is negative");
  expect_c("set cpu 1", commfuseSetTensorDevice(t1, COMMFUSE_DEVICE_CPU, 1), COMMFUSE_PARAM_INVALID,
           "must be 0");
  // An ordinal past the devices present is refused where they can be counted (it had been
  // accepted, and planning failed naming no tensor); without a usable device, planning says so.
  const int devices = commfuse::kernels::cuda::runtime_info().device_count;
  if (commfuse::kernels::cuda::device_available())
    expect_c("set cuda past the devices",
             commfuseSetTensorDevice(t1, COMMFUSE_DEVICE_CUDA, devices), COMMFUSE_PARAM_INVALID,
             "is past this host's CUDA devices");
  else
    EXPECT(commfuseSetTensorDevice(t1, COMMFUSE_DEVICE_CUDA, 99) == COMMFUSE_SUCCESS &&
               commfuseSetTensorDevice(t1, COMMFUSE_DEVICE_CPU, 0) == COMMFUSE_SUCCESS,
           "no usable device: an ordinal is left to planning");
  const std::string g = comm.name();
  uint64_t ws = 0;
  commfuseOpExecutor_t* ex = nullptr;
  EXPECT(commfuseSetTensorDevice(t2, COMMFUSE_DEVICE_CUDA, 0) == COMMFUSE_SUCCESS, "set x2");
  expect_c("C mixed devices",
           commfuseAllGatherMatmulGetWorkspaceSize(t1, t2, nullptr, g.c_str(), 0, 0, 1, to, tg, &ws,
                                                   &ex),
           COMMFUSE_PARAM_INVALID, "x2 is on cuda:0 but x1 is on cpu");
  for (commfuseTensor_t* t : {t1, to, tg})
    EXPECT(commfuseSetTensorDevice(t, COMMFUSE_DEVICE_CUDA, 0) == COMMFUSE_SUCCESS, "set");
  expect_c("C all on cuda:0",
           commfuseAllGatherMatmulGetWorkspaceSize(t1, t2, nullptr, g.c_str(), 0, 0, 1, to, tg, &ws,
                                                   &ex),
           want, needle);
  for (commfuseTensor_t* t : {t1, t2, to, tg}) commfuseDestroyTensor(t);
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

  expect_error("x2 on another device", inv,
               {"all_gather_matmul", "x2 is on cuda:0", "x1 is on cpu"},
               [&] { commfuse::all_gather_matmul(vx1, on(vx2, kCuda0), g, R, vout, vgath); });
  good_call(comm);
  expect_error("output on cuda:1", inv, {"matmul_all_reduce", "output is on cuda:1", "cuda:0"},
               [&] {
                 commfuse::matmul_all_reduce(
                     on(vx1, kCuda0), on(vx2, kCuda0), g,
                     on(TensorView(out.data(), DType::kFloat32, {kM, kN}), {DeviceType::kCuda, 1}));
               });
  expect_error("device type 7", inv, {"matmul_reduce_scatter", "x1's device (type 7"}, [&] {
    commfuse::matmul_reduce_scatter(on(vx1, {static_cast<DeviceType>(7), 0}), vx2, g, R,
                                    TensorView(out.data(), DType::kFloat32, {kM / R, kN}));
  });
  expect_error("cuda index -1", inv, {"all_gather_matmul", "x1's device (type 1, index -1)"}, [&] {
    commfuse::all_gather_matmul(on(vx1, {DeviceType::kCuda, -1}), vx2, g, R, vout, vgath);
  });
  good_call(comm);

  // Ops the CUDA backend does not run.
  expect_error(
      "alltoall_matmul mixed", inv, {"alltoall_matmul", "x2 is on cpu but x1 is on cuda:0"}, [&] {
        commfuse::alltoall_matmul(on(TensorView(x1.data(), DType::kFloat32, {R, kK}), kCuda0),
                                  TensorView(x2.data(), DType::kFloat32, {kK * R, kN}), g,
                                  on(TensorView(out.data(), DType::kFloat32, {1, kN}), kCuda0));
      });
  std::vector<int8_t> codes(static_cast<size_t>(R * 128));
  std::vector<float> scales(static_cast<size_t>(R)), qout(static_cast<size_t>(R * 128));
  expect_error("quant_all_reduce mixed", inv,
               {"quant_all_reduce", "scales is on cuda:0 but x is on cpu"}, [&] {
                 commfuse::quant_all_reduce(
                     TensorView(codes.data(), DType::kInt8, {R, 128}),
                     on(TensorView(scales.data(), DType::kFloat32, {R, 1}), kCuda0), g,
                     TensorView(qout.data(), DType::kFloat32, {R, 128}));
               });
  expect_error("quantize on cuda", inv, {"quantize", "x is on cuda:0", "not supported"}, [&] {
    commfuse::quantize(on(TensorView(qout.data(), DType::kFloat32, {R, 128}), kCuda0),
                       "per_token_group", TensorView(codes.data(), DType::kInt8, {R, 128}),
                       TensorView(scales.data(), DType::kFloat32, {R, 1}));
  });
  good_call(comm);

  // The ops the backend runs, every tensor labeled cuda:0 (host memory here).
  namespace kc = commfuse::kernels::cuda;
  const bool built = kc::runtime_info().built, usable = kc::device_available();
  const bool blaslt = usable && kc::blaslt_unavailable().empty();
  const Status want = !built || blaslt ? inv : Status::kRuntimeError;
  const char* needle = !built    ? "built without CUDA"
                       : !usable ? "no usable CUDA device"
                       : !blaslt ? "cuBLASLt cannot be used"
                                 : "x1 is labeled cuda:0 but its memory is host memory";
  expect_error("all_gather_matmul on cuda:0", want, {"all_gather_matmul", needle}, [&] {
    commfuse::all_gather_matmul(on(vx1, kCuda0), on(vx2, kCuda0), g, R, on(vout, kCuda0),
                                on(vgath, kCuda0));
  });
  expect_error("matmul_all_reduce on cuda:0", want, {"matmul_all_reduce", needle}, [&] {
    commfuse::matmul_all_reduce(on(vx1, kCuda0), on(vx2, kCuda0), g,
                                on(TensorView(out.data(), DType::kFloat32, {kM, kN}), kCuda0));
  });
  expect_error("matmul_reduce_scatter on cuda:0", want, {"matmul_reduce_scatter", needle}, [&] {
    commfuse::matmul_reduce_scatter(
        on(TensorView(x1.data(), DType::kFloat32, {kM * R, kK}), kCuda0), on(vx2, kCuda0), g, R,
        on(TensorView(out.data(), DType::kFloat32, {kM, kN}), kCuda0));
  });
  // quant_all_reduce needs no cuBLASLt: with a device, the memory check answers.
  const char* quant_needle = !built    ? "built without CUDA"
                             : !usable ? "no usable CUDA device"
                                       : "x is labeled cuda:0 but its memory is host memory";
  expect_error("quant_all_reduce on cuda:0", !built || usable ? inv : Status::kRuntimeError,
               {"quant_all_reduce", quant_needle}, [&] {
                 commfuse::quant_all_reduce(
                     on(TensorView(codes.data(), DType::kInt8, {R, 128}), kCuda0),
                     on(TensorView(scales.data(), DType::kFloat32, {R, 1}), kCuda0), g,
                     on(TensorView(qout.data(), DType::kFloat32, {R, 128}), kCuda0));
               });
  expect_error("alltoall_matmul on cuda:0", want, {"alltoall_matmul", needle}, [&] {
    commfuse::alltoall_matmul(on(TensorView(x1.data(), DType::kFloat32, {R, kK}), kCuda0),
                              on(TensorView(x2.data(), DType::kFloat32, {kK * R, kN}), kCuda0), g,
                              on(TensorView(out.data(), DType::kFloat32, {1, kN}), kCuda0));
  });
  // alltoall_quant_matmul: every combination and x2 layout reaches the device checks (x2 is
  // converted to cuBLASLt's int8 TN form on the device).
  std::vector<uint16_t> a1(static_cast<size_t>(R * kK));
  std::vector<int8_t> w8(static_cast<size_t>(kK * R * kN));
  std::vector<uint8_t> w4(static_cast<size_t>(kK * R * kN / 2)),
      a4(static_cast<size_t>(R * kK / 2));
  std::vector<float> w_scale(kN, 1.f), a4_scale(static_cast<size_t>(R), 1.f);
  std::vector<uint16_t> a_out(kN);
  const TensorView x2_scale_d = on(TensorView(w_scale.data(), DType::kFloat32, {kN}), kCuda0);
  const TensorView a_out_d = on(TensorView(a_out.data(), DType::kBFloat16, {1, kN}), kCuda0);
  expect_error("alltoall_quant_matmul A16W8 x2 not transposed on cuda:0", want,
               {"alltoall_quant_matmul", needle}, [&] {
                 commfuse::alltoall_quant_matmul(
                     on(TensorView(a1.data(), DType::kBFloat16, {R, kK}), kCuda0),
                     on(TensorView(w8.data(), DType::kInt8, {kK * R, kN}), kCuda0), x2_scale_d, g,
                     a_out_d);
               });
  expect_error(
      "alltoall_quant_matmul A16W4 on cuda:0", want, {"alltoall_quant_matmul", needle}, [&] {
        commfuse::alltoall_quant_matmul(
            on(TensorView(a1.data(), DType::kBFloat16, {R, kK}), kCuda0),
            on(TensorView(w4.data(), DType::kInt4, {kK * R, kN}), kCuda0), x2_scale_d, g, a_out_d);
      });
  expect_error("alltoall_quant_matmul A4W4 on cuda:0", want, {"alltoall_quant_matmul", needle},
               [&] {
                 commfuse::AlltoAllQuantMatmulOptions o;
                 o.x1_quant_mode = 3;
                 o.x1_scale = on(TensorView(a4_scale.data(), DType::kFloat32, {R}), kCuda0);
                 commfuse::alltoall_quant_matmul(
                     on(TensorView(a4.data(), DType::kInt4, {R, kK}), kCuda0),
                     on(TensorView(w4.data(), DType::kInt4, {kK * R, kN}), kCuda0), x2_scale_d, g,
                     a_out_d, TensorView(), o);
               });
  // SPEC §6 A8W8 with x2 (k, n) on a device (transposed in device scratch for cuBLASLt's
  // int8 GEMM) reaches the device checks.
  std::vector<int8_t> q1(static_cast<size_t>(kM * kK)), q2(static_cast<size_t>(kK * kN));
  std::vector<float> q2s(kN, 1.f);
  std::vector<uint16_t> qo(static_cast<size_t>(kM * R * kN));
  expect_error("A8W8 all_gather_matmul x2 not transposed on cuda:0", want,
               {"all_gather_matmul", needle}, [&] {
                 commfuse::AllGatherMatmulOptions o;
                 o.x2_scale = on(TensorView(q2s.data(), DType::kFloat32, {kN}), kCuda0);
                 o.gather_output = false;
                 commfuse::all_gather_matmul(
                     on(TensorView(q1.data(), DType::kInt8, {kM, kK}), kCuda0),
                     on(TensorView(q2.data(), DType::kInt8, {kK, kN}), kCuda0), g, R,
                     on(TensorView(qo.data(), DType::kBFloat16, {kM * R, kN}), kCuda0),
                     TensorView(), o);
               });
  // SPEC §6 HiF8 on a device (its codes widened to bf16 for cuBLASLt) reaches the device checks.
  std::vector<uint8_t> h1(static_cast<size_t>(kM * kK)), h2(static_cast<size_t>(kK * kN));
  std::vector<float> h1s(1, 1.f);
  expect_error("HiF8 all_gather_matmul on cuda:0", want, {"all_gather_matmul", needle}, [&] {
    commfuse::AllGatherMatmulOptions o;
    o.x1_scale = on(TensorView(h1s.data(), DType::kFloat32, {1}), kCuda0);
    o.x2_scale = on(TensorView(q2s.data(), DType::kFloat32, {kN}), kCuda0);
    o.gather_output = false;
    commfuse::all_gather_matmul(on(TensorView(h1.data(), DType::kHiFloat8, {kM, kK}), kCuda0),
                                on(TensorView(h2.data(), DType::kHiFloat8, {kK, kN}), kCuda0), g, R,
                                on(TensorView(qo.data(), DType::kBFloat16, {kM * R, kN}), kCuda0),
                                TensorView(), o);
  });
  good_call(comm);
  c_api_cases(comm, want == inv ? COMMFUSE_PARAM_INVALID : COMMFUSE_RUNTIME_ERROR, needle);
  // A host plan ignores Plan::execute's stream (the device plans' per-call stream).
  std::vector<float> hx1(kM * kK, static_cast<float>(comm.rank() + 1)), hx2(kK * kN, 0.5f);
  commfuse::AllGatherMatmulPlan plan(TensorView(hx1.data(), DType::kFloat32, {kM, kK}),
                                     TensorView(hx2.data(), DType::kFloat32, {kK, kN}), g, R, vout,
                                     vgath);
  std::vector<float> ws(plan.workspace_size() / sizeof(float) + 1);
  plan.execute(ws.data(), plan.workspace_size(), reinterpret_cast<void*>(uintptr_t{0x1234}));
  for (int s = 0; s < R; ++s)
    EXPECT(gathered[static_cast<size_t>(s * kM * kK)] == static_cast<float>(s + 1),
           "a host plan executed with a stream: rank %d's rows are wrong", s);
  good_call(comm);
  return 0;
}

}  // namespace optest
