// Every rejection rule of SPEC §4 (and the C API's own): the right status and a message
// naming the op, the rank and the argument, raised in the plan step before any
// communication and without touching the output.
#include <commfuse/commfuse.h>

#include <cstring>
#include <functional>
#include <string>

#include "quant_cases.hpp"

namespace optest {
namespace {

using commfuse::Status;
using commfuse::TensorView;

void check_message(const std::string& what, const char* msg,
                   const std::vector<std::string>& needles) {
  for (const std::string& needle : needles)
    EXPECT(std::strstr(msg, needle.c_str()) != nullptr, "%s: message lacks '%s': %s", what.c_str(),
           needle.c_str(), msg);
}

void expect_reject(const std::string& what, Status code, const std::vector<std::string>& needles,
                   const std::function<void()>& f) {
  try {
    f();
    EXPECT(false, "%s: accepted", what.c_str());
  } catch (const commfuse::Error& e) {
    EXPECT(e.code() == code, "%s: status %d, expected %d: %s", what.c_str(),
           static_cast<int>(e.code()), static_cast<int>(code), e.what());
    check_message(what, e.what(), needles);
  }
}

constexpr DType kI8 = DType::kInt8, kE4 = DType::kFloat8E4M3FN, kF32 = DType::kFloat32,
                kE8 = DType::kFloat8E8M0;

struct Args {
  TensorView x, scales, output;
  std::string group, reduce_op = "sum";
};

}  // namespace

int case_quant_reject(commfuse::Comm& comm) {
  const int R = comm.world_size();
  const std::string rank = "(rank " + std::to_string(comm.rank()) + ")";
  std::vector<uint8_t> in(1 << 16, 0), out(1 << 16, 0xCD);
  const int64_t bs = 2 * R, h = 1024;
  void* i = in.data();
  void* o = out.data();
  const Args kg{TensorView(i, kI8, {bs, h}), TensorView(i, kF32, {bs, h / 128}),
                TensorView(o, kF32, {bs, h}), comm.name()};
  const Args mx{TensorView(i, kE4, {bs, h}), TensorView(i, kE8, {bs, h / 64, 2}),
                TensorView(o, DType::kBFloat16, {bs, h}), comm.name()};
  const Status inv = Status::kParamInvalid, nul = Status::kParamNullptr;

  for (bool rs : {false, true}) {
    const std::string op = rs ? "quant_reduce_scatter" : "quant_all_reduce";
    auto plan = [rs](const Args& a) {
      if (rs)
        commfuse::QuantReduceScatterPlan p(a.x, a.scales, a.group, a.reduce_op, a.output);
      else
        commfuse::QuantAllReducePlan p(a.x, a.scales, a.group, a.reduce_op, a.output);
    };
    Args ok_kg = kg, ok_mx = mx;
    if (rs) {
      ok_kg.output = TensorView(o, kF32, {bs / R, h});
      ok_mx.output = TensorView(o, DType::kBFloat16, {bs / R, h});
    }
    plan(ok_kg);  // the baselines are accepted
    plan(ok_mx);
    auto t = [&](const std::string& what, Status code, std::initializer_list<std::string> needles,
                 const Args& base, const std::function<void(Args&)>& mod) {
      Args a = base;
      mod(a);
      std::vector<std::string> n(needles);
      n.push_back(op);
      if (a.group == comm.name()) n.push_back(rank);  // an unknown group has no rank to name
      expect_reject(op + " " + what, code, n, [&] { plan(a); });
    };
    t("unknown group", inv, {"no_such_group"}, ok_kg, [](Args& a) { a.group = "no_such_group"; });
    t("reduce_op", inv, {"reduce_op is 'max'", "sum"}, ok_kg, [](Args& a) { a.reduce_op = "max"; });
    t("x absent", nul, {"x is null"}, ok_kg, [](Args& a) { a.x = TensorView(); });
    t("x null data", nul, {"x data is null"}, ok_kg, [](Args& a) { a.x.data = nullptr; });
    t("x dtype", inv, {"x dtype is float16", "int8, hifloat8"}, ok_kg,
      [](Args& a) { a.x.dtype = DType::kFloat16; });
    // uint8 (what a Python caller gets from HiFloat8 codes without dtype=) and the other
    // data-movement dtypes are no quantized input.
    for (DType dt : {DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kBool})
      t("x data-movement dtype", inv,
        {"x dtype is " + std::string(commfuse::dtype_name(dt)), "int8, hifloat8"}, ok_kg,
        [dt](Args& a) { a.x.dtype = dt; });
    t("x 1-D", inv, {"x must be 2-D (bs, H) or 3-D"}, ok_kg,
      [&](Args& a) { a.x = TensorView(i, kI8, {h}); });
    t("x empty", inv, {"x dim 0 is 0", "empty"}, ok_kg, [&](Args& a) {
      a.x = TensorView(i, kI8, {0, h});
      a.scales = TensorView(i, kF32, {0, h / 128});
    });
    t("x strided", inv, {"x must be row-major"}, ok_kg, [&](Args& a) {
      a.x = TensorView(i, kI8, {bs, h}, {2 * h, 1});
    });
    t("H % 128", inv, {"(H) is 1000", "multiple of 128"}, ok_kg, [&](Args& a) {
      a.x = TensorView(i, kI8, {bs, 1000});
      a.output = TensorView(o, kF32, {bs, 1000});
    });
    t("H % 64 mx", inv, {"(H) is 96", "multiple of 64"}, ok_mx, [&](Args& a) {
      a.x = TensorView(i, kE4, {bs, 96});
      a.scales = TensorView(i, kE8, {bs, 1, 2});
    });
    t("scales absent", nul, {"scales is null"}, ok_kg, [](Args& a) { a.scales = TensorView(); });
    t("scales dtype", inv, {"scales dtype is float16", "float32", "float8_e8m0"}, ok_kg,
      [](Args& a) { a.scales.dtype = DType::kFloat16; });
    t("int8 with mx scales", inv, {"x dtype int8 with float8_e8m0 scales"}, ok_mx,
      [](Args& a) { a.x.dtype = kI8; });
    t("hifloat8 with mx scales", inv, {"x dtype hifloat8 with float8_e8m0 scales"}, ok_mx,
      [](Args& a) { a.x.dtype = DType::kHiFloat8; });
    t("scales dim 1", inv, {"scales dim 1 is 7 but must be H/128 = 8"}, ok_kg, [&](Args& a) {
      a.scales = TensorView(i, kF32, {bs, 7});
    });
    t("scales dim 0", inv, {"scales dim 0 is", "x dim 0 is"}, ok_kg, [&](Args& a) {
      a.scales = TensorView(i, kF32, {bs + 1, h / 128});
    });
    t("scales ndim", inv, {"scales must be 2-D (bs, H/128)"}, ok_kg, [&](Args& a) {
      a.scales = TensorView(i, kF32, {bs, h / 128, 1});
    });
    t("mx scales ndim", inv, {"scales must be 3-D (bs, H/64, 2)"}, ok_mx, [&](Args& a) {
      a.scales = TensorView(i, kE8, {bs, h / 32});
    });
    t("mx scales dim 1", inv, {"scales dim 1 is 32 but must be H/64 = 16"}, ok_mx, [&](Args& a) {
      a.scales = TensorView(i, kE8, {bs, 32, 1});
    });
    t("mx scales dim 2", inv, {"scales dim 2 is 4 but must be 2"}, ok_mx, [&](Args& a) {
      a.scales = TensorView(i, kE8, {bs, h / 64, 4});
    });
    t("3-D scales dim 1", inv, {"scales dim 1 is 3 but x dim 1 is", "must match"}, ok_kg,
      [&](Args& a) {
        a.x = TensorView(i, kI8, {1, bs, h});
        a.scales = TensorView(i, kF32, {1, 3, h / 128});
      });
    t("output absent", nul, {"output is null"}, ok_kg, [](Args& a) { a.output = TensorView(); });
    t("output dtype", inv, {"output dtype is int8", "float16, bfloat16 or float32"}, ok_kg,
      [](Args& a) { a.output.dtype = kI8; });
    t("output shape", inv, {"output shape is", rs ? "(BS/R, H)" : "x's shape"}, ok_kg,
      [&](Args& a) {
        a.output = TensorView(o, kF32, {bs, h + 128});
      });
    if (rs && R > 1)
      t("BS % R", inv, {"x has " + std::to_string(bs + 1) + " rows", "multiple of the world size"},
        ok_kg, [&](Args& a) {
          a.x = TensorView(i, kI8, {bs + 1, h});
          a.scales = TensorView(i, kF32, {bs + 1, h / 128});
        });
  }
  EXPECT(out == std::vector<uint8_t>(out.size(), 0xCD), "an output was written");

  // The C entry points: null arguments, the same rules, and a foreign executor.
  const int64_t xs[] = {bs, h}, ss[] = {bs, 7};
  commfuseTensor_t* tx = commfuseCreateTensor(xs, 2, nullptr, COMMFUSE_INT8, i);
  commfuseTensor_t* ts = commfuseCreateTensor(ss, 2, nullptr, COMMFUSE_FLOAT32, i);
  commfuseTensor_t* to = commfuseCreateTensor(xs, 2, nullptr, COMMFUSE_FLOAT32, o);
  uint64_t wsz = 0;
  commfuseOpExecutor_t* ex = nullptr;
  auto expect_c = [](const char* what, commfuseStatus_t got, commfuseStatus_t want,
                     std::initializer_list<std::string> needles) {
    EXPECT(got == want, "%s: status %d, expected %d: %s", what, static_cast<int>(got),
           static_cast<int>(want), commfuseGetLastErrorMessage());
    if (got == want) check_message(what, commfuseGetLastErrorMessage(), needles);
  };
  const char* g = comm.name().c_str();
  expect_c("C scales dim 1",
           commfuseQuantAllReduceGetWorkspaceSize(tx, ts, g, "sum", to, &wsz, &ex),
           COMMFUSE_PARAM_INVALID, {"quant_all_reduce", rank, "scales dim 1 is 7"});
  EXPECT(ex == nullptr, "executor set on failure");
  expect_c("C null x",
           commfuseQuantReduceScatterGetWorkspaceSize(nullptr, ts, g, "sum", to, &wsz, &ex),
           COMMFUSE_PARAM_NULLPTR, {"quant_reduce_scatter", "x is null"});
  expect_c("C null reduceOp",
           commfuseQuantAllReduceGetWorkspaceSize(tx, ts, g, nullptr, to, &wsz, &ex),
           COMMFUSE_PARAM_NULLPTR, {"reduceOp is null"});
  expect_c("C null group",
           commfuseQuantAllReduceGetWorkspaceSize(tx, ts, nullptr, "sum", to, &wsz, &ex),
           COMMFUSE_PARAM_NULLPTR, {"group is null"});
  expect_c("C null workspaceSize",
           commfuseQuantAllReduceGetWorkspaceSize(tx, ts, g, "sum", to, nullptr, &ex),
           COMMFUSE_PARAM_NULLPTR, {"workspaceSize"});
  expect_c("C null executor", commfuseQuantAllReduce(nullptr, 0, nullptr, nullptr),
           COMMFUSE_PARAM_NULLPTR, {"executor is null"});
  commfuseDestroyTensor(tx);
  commfuseDestroyTensor(ts);
  commfuseDestroyTensor(to);
  return 0;
}

// Rank 1 passes bad scales; the others must fail promptly naming it instead of hanging.
int case_quant_reject_peer(commfuse::Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  const int64_t bs = 2 * R, h = 128;
  std::vector<uint8_t> x(static_cast<size_t>(bs * h), 1);
  std::vector<float> sc(static_cast<size_t>(bs), 1.0f), out(static_cast<size_t>(bs * h), -1.0f);
  try {
    commfuse::quant_all_reduce(TensorView(x.data(), kI8, {bs, h}),
                               TensorView(sc.data(), kF32, {me == 1 ? bs - 1 : bs, 1}), comm.name(),
                               TensorView(out.data(), kF32, {bs, h}));
    EXPECT(false, "rank %d: no error", me);
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT(me == 1, "rank %d got PARAM_INVALID: %s", me, e.what());
    std::printf("rank %d: got expected PARAM_INVALID: %s\n", me, e.what());
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT(me != 1, "rank 1 got RUNTIME_ERROR: %s", e.what());
    EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "does not name rank 1: %s", e.what());
    std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", me, e.what());
  }
  if (me == 1) EXPECT(out == std::vector<float>(out.size(), -1.0f), "rank 1's output was written");
  return 0;
}

}  // namespace optest
