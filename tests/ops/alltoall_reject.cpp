// Every rejection rule of SPEC §3 for alltoall_quant_matmul and alltoall_matmul: the right
// status and a message naming the op, the rank and the argument, in the plan step.
#include <commfuse/commfuse.h>

#include <cstring>
#include <functional>
#include <string>

#include "numerics.hpp"

namespace optest {
namespace {

using commfuse::Status;
using commfuse::TensorView;

// Every message names the rank too.
void expect_reject(const std::string& rank, const char* what, Status code,
                   std::initializer_list<const char*> needles, const std::function<void()>& f) {
  expect_error(what, code, needles, f, rank.c_str());
}

struct QArgs {
  TensorView x1, x2, scale, out, a2a;
  std::string group;
  commfuse::AlltoAllQuantMatmulOptions o;
  void plan() const { commfuse::AlltoAllQuantMatmulPlan p(x1, x2, scale, group, out, a2a, o); }
};

}  // namespace

int case_alltoall_reject(commfuse::Comm& comm) {
  const int R = comm.world_size();
  const std::string rank = "alltoall_quant_matmul(rank " + std::to_string(comm.rank()) + ")";
  std::vector<uint8_t> in(1 << 16, 0), outb(1 << 16, 0xCD);
  void* i = in.data();
  void* o = outb.data();
  constexpr DType F16 = DType::kFloat16, BF16 = DType::kBFloat16, I8 = DType::kInt8,
                  I4 = DType::kInt4, F32 = DType::kFloat32;
  const int64_t rows = 2, bs = rows * R, h = 8, k = h * R, n = 6;
  const QArgs ok{TensorView(i, F16, {bs, h}),
                 TensorView(i, I8, {k, n}),
                 TensorView(i, F32, {n}),
                 TensorView(o, F16, {rows, n}),
                 TensorView(),
                 comm.name(),
                 {}};
  ok.plan();  // the baseline is accepted
  auto q = [&](const char* what, Status code, std::initializer_list<const char*> needles,
               const std::function<void(QArgs&)>& mutate) {
    QArgs a = ok;
    mutate(a);
    expect_reject(rank, what, code, needles, [&] { a.plan(); });
  };
  const Status INV = Status::kParamInvalid, NUL = Status::kParamNullptr;
  // R*H past the exact int32 sum of A16W8 (132104 products of 127 x 128): the sum would
  // wrap. Real buffers (a check that let it through would read them, not crash).
  {
    const int64_t hb = 132105 / R + 1, kb = hb * R;
    std::vector<uint8_t> x1(static_cast<size_t>(bs * hb * 2)), x2(static_cast<size_t>(kb * n));
    q("A16W8 R*H past int32", INV, {"R*H is", "only up to 132104"}, [&](QArgs& a) {
      a.x1 = TensorView(x1.data(), F16, {bs, hb});
      a.x2 = TensorView(x2.data(), I8, {kb, n});
    });
  }
  // Combinations.
  q("A16 with x1QuantMode 3", INV, {"unsupported combination", "x1QuantMode 3"},
    [](QArgs& a) { a.o.x1_quant_mode = 3; });
  q("x2QuantMode 1", INV, {"unsupported combination", "x2QuantMode 1"},
    [](QArgs& a) { a.o.x2_quant_mode = 1; });
  q("fp32 x1", INV, {"unsupported combination", "x1 float32"}, [&](QArgs& a) {
    a.x1 = TensorView(i, F32, {bs, h});
  });
  q("int4 x1 with int8 x2", INV, {"unsupported combination"}, [&](QArgs& a) {
    a.x1 = TensorView(i, I4, {bs, h});
    a.o.x1_quant_mode = 3;
  });
  q("x2 float16", INV, {"unsupported combination", "x2 float16"}, [&](QArgs& a) {
    a.x2 = TensorView(i, F16, {k, n});
  });
  for (DType dt : {DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kBool}) {
    q("data-movement x1", INV, {"unsupported combination"}, [&](QArgs& a) {
      a.x1 = TensorView(i, dt, {bs, h});
    });
    q("data-movement x2", INV, {"unsupported combination"}, [&](QArgs& a) {
      a.x2 = TensorView(i, dt, {k, n});
    });
  }
  // Reserved arguments.
  q("commScale", INV, {"commScaleOptional"},
    [&](QArgs& a) { a.o.comm_scale = TensorView(i, F32, {n}); });
  q("x1Offset", INV, {"x1OffsetOptional"},
    [&](QArgs& a) { a.o.x1_offset = TensorView(i, F32, {n}); });
  q("x2Offset", INV, {"x2OffsetOptional"},
    [&](QArgs& a) { a.o.x2_offset = TensorView(i, F32, {n}); });
  q("commQuantMode", INV, {"commQuantMode"}, [](QArgs& a) { a.o.comm_quant_mode = 1; });
  q("commQuantDtype", INV, {"commQuantDtype"}, [](QArgs& a) { a.o.comm_quant_dtype = 2; });
  q("groupSize", INV, {"groupSize"}, [](QArgs& a) { a.o.group_size = 128; });
  q("transposeX1", INV, {"transposeX1"}, [](QArgs& a) { a.o.transpose_x1 = true; });
  q("alltoAllAxes", INV, {"alltoAllAxesOptional", "[-1, -2]"}, [](QArgs& a) {
    a.o.all_to_all_axes = std::vector<int64_t>{-1, -2};
  });
  // Shapes.
  if (R > 1)
    q("BS % R", INV, {"x1 dim 0 (BS)"}, [&](QArgs& a) { a.x1 = TensorView(i, F16, {bs + 1, h}); });
  q("BS = 0", INV, {"x1 is empty"}, [&](QArgs& a) { a.x1 = TensorView(i, F16, {0, h}); });
  q("empty x1", INV, {"x1"}, [&](QArgs& a) { a.x1 = TensorView(i, F16, {bs, 0}); });
  q("empty x2 (N = 0)", INV, {"x2"}, [&](QArgs& a) { a.x2 = TensorView(i, I8, {k, 0}); });
  q("x2 dim 0 != R*H", INV, {"x2 dim 0", "R*H"}, [&](QArgs& a) {
    a.x2 = TensorView(i, I8, {k + 1, n});
  });
  q("x2 transposed dim 1", INV, {"x2 dim 1", "transposeX2"}, [&](QArgs& a) {
    a.o.transpose_x2 = true;  // x2 still (k, n): dim 1 is n, not k
  });
  q("x1 3-D", INV, {"x1 must be 2-D"}, [&](QArgs& a) { a.x1 = TensorView(i, F16, {1, bs, h}); });
  q("x1 null", NUL, {"x1 is null"}, [](QArgs& a) { a.x1 = TensorView(); });
  q("x2Scale null", NUL, {"x2Scale is null"}, [](QArgs& a) { a.scale = TensorView(); });
  q("x2Scale shape", INV, {"x2Scale shape", "N = 6"},
    [&](QArgs& a) { a.scale = TensorView(i, F32, {n + 1}); });
  q("x2Scale dtype", INV, {"x2Scale dtype"}, [&](QArgs& a) { a.scale = TensorView(i, F16, {n}); });
  q("smooth shape", INV, {"x1ScaleOptional shape"},
    [&](QArgs& a) { a.o.x1_scale = TensorView(i, F16, {k + 1}); });
  q("smooth dtype", INV, {"x1ScaleOptional dtype"},
    [&](QArgs& a) { a.o.x1_scale = TensorView(i, F32, {k}); });
  q("bias dtype", INV, {"bias dtype"}, [&](QArgs& a) { a.o.bias = TensorView(i, BF16, {n}); });
  q("bias shape", INV, {"bias shape"}, [&](QArgs& a) { a.o.bias = TensorView(i, F32, {n + 1}); });
  q("output shape", INV, {"output shape", "(BS/R, N)"}, [&](QArgs& a) {
    a.out = TensorView(o, F16, {rows + 1, n});
  });
  q("output dtype", INV, {"output dtype"}, [&](QArgs& a) {
    a.out = TensorView(o, BF16, {rows, n});
  });
  q("output null", NUL, {"output is null"}, [](QArgs& a) { a.out = TensorView(); });
  q("alltoAllOut shape", INV, {"alltoAllOutOptional shape"}, [&](QArgs& a) {
    a.a2a = TensorView(o, F16, {rows, k + 1});
  });
  q("alltoAllOut dtype", INV, {"alltoAllOutOptional dtype"}, [&](QArgs& a) {
    a.a2a = TensorView(o, F32, {rows, k});
  });
  // int4.
  q("int4 x2 odd N", INV, {"x2 dim 1", "even"}, [&](QArgs& a) {
    a.x2 = TensorView(i, I4, {k, 5});
  });
  auto a4w4 = [&](QArgs& a) {
    a.x1 = TensorView(i, I4, {bs, h});
    a.x2 = TensorView(i, I4, {k, n});
    a.o.x1_quant_mode = 3;
    a.o.x1_scale = TensorView(i, F32, {bs});
  };
  {
    QArgs a = ok;
    a4w4(a);
    a.plan();  // the A4W4 baseline is accepted
  }
  q("int4 x1 odd H", INV, {"x1 dim 1 (H)", "even"}, [&](QArgs& a) {
    a4w4(a);
    a.x1 = TensorView(i, I4, {bs, 7});
    a.x2 = TensorView(i, I4, {7 * R, n});
  });
  q("A4W4 without token scale", NUL, {"x1ScaleOptional is null"}, [&](QArgs& a) {
    a4w4(a);
    a.o.x1_scale.reset();
  });
  q("A4W4 token scale shape", INV, {"x1ScaleOptional shape", "(BS,)"}, [&](QArgs& a) {
    a4w4(a);
    a.o.x1_scale = TensorView(i, F32, {k});
  });
  q("A4W4 token scale dtype", INV, {"x1ScaleOptional dtype"}, [&](QArgs& a) {
    a4w4(a);
    a.o.x1_scale = TensorView(i, F16, {bs});
  });
  q("A4W4 output float32", INV, {"output dtype", "A4W4"}, [&](QArgs& a) {
    a4w4(a);
    a.out = TensorView(o, F32, {rows, n});
  });
  // packed_x2 (A16W8 and A16W4, not A4W4): x2 itself, or with transposeX2 its buffer's
  // (R*H, N) view.
  {
    const commfuse::PackedWeight plain(ok.x2);
    const commfuse::PackedWeight wide(TensorView(i, I8, {k, n}, {n + 1, 1}));
    const commfuse::PackedWeight buffer_t(TensorView(i, I8, {n, k}).t());
    const commfuse::PackedWeight other_t(TensorView(i, I8, {k, n}).t());
    const commfuse::PackedWeight f16(TensorView(i, F16, {k, n}));
    {
      QArgs a = ok;
      a.o.packed_x2 = &plain;
      a.plan();  // accepted
      a.x2 = TensorView(i, I8, {n, k});
      a.o.transpose_x2 = true;
      a.o.packed_x2 = &buffer_t;
      a.plan();  // (N, R*H) buffer, packed from its transposed view: accepted
    }
    for (const commfuse::PackedWeight* w : {&wide, &other_t, &f16})
      q("packed_x2 of another x2", INV, {"packed_x2 was packed from another x2"},
        [&](QArgs& a) { a.o.packed_x2 = w; });
    q("packed_x2 of x2 as given with transposeX2", INV, {"packed_x2 was packed from another x2"},
      [&](QArgs& a) {
        a.x2 = TensorView(i, I8, {n, k});
        a.o.transpose_x2 = true;
        a.o.packed_x2 = &other_t;  // the (k, n) buffer's view: another layout
      });
    // Square weights (N = R*H): x2's (N, R*H) buffer packed as given instead of its .t() has
    // the right shape; only its layout (row-major, not transposed) tells them apart.
    {
      const commfuse::PackedWeight as_given(TensorView(i, I8, {k, k}));
      q("packed_x2 of x2 as given with transposeX2, square", INV,
        {"packed_x2 was packed from another x2", "transposed"}, [&](QArgs& a) {
          a.x2 = TensorView(i, I8, {k, k});
          a.scale = TensorView(i, F32, {k});
          a.out = TensorView(o, F16, {rows, k});
          a.o.transpose_x2 = true;
          a.o.packed_x2 = &as_given;
        });
    }
    q("packed_x2 with A4W4", INV, {"packed_x2 with A4W4", "not supported"}, [&](QArgs& a) {
      a4w4(a);
      a.o.packed_x2 = &plain;
    });
    // A16W4 takes an int4 PackedWeight, not one of an int8 x2.
    q("packed_x2 of an int8 x2 with A16W4", INV, {"packed_x2 was packed from another x2", "int8"},
      [&](QArgs& a) {
        a.x2 = TensorView(i, I4, {k, n});
        a.o.packed_x2 = &plain;
      });
  }
  {
    QArgs a = ok;
    a.group = "no-such-group";  // no group, so no rank in the message
    expect_reject("alltoall_quant_matmul: group", "unknown group", INV, {"no-such-group"},
                  [&] { a.plan(); });
  }

  // C API: a null executor pointer, and a reserved argument through the C signature.
  {
    auto* t1 = commfuseCreateTensor(ok.x1.shape, 2, nullptr, COMMFUSE_FLOAT16, i);
    auto* t2 = commfuseCreateTensor(ok.x2.shape, 2, nullptr, COMMFUSE_INT8, i);
    auto* ts = commfuseCreateTensor(ok.scale.shape, 1, nullptr, COMMFUSE_FLOAT32, i);
    auto* to = commfuseCreateTensor(ok.out.shape, 2, nullptr, COMMFUSE_FLOAT16, o);
    uint64_t ws = 0;
    commfuseOpExecutor_t* ex = nullptr;
    commfuseStatus_t st = commfuseAlltoAllQuantMatmulGetWorkspaceSize(
        t1, t2, nullptr, nullptr, ts, nullptr, nullptr, nullptr, comm.name().c_str(), nullptr, 7, 2,
        0, -1, 2, 0, 1, 0, to, nullptr, &ws, &ex);
    EXPECT(
        st == COMMFUSE_PARAM_INVALID && std::strstr(commfuseGetLastErrorMessage(), "transposeX1"),
        "C transposeX1: %d %s", static_cast<int>(st), commfuseGetLastErrorMessage());
    st = commfuseAlltoAllQuantMatmulGetWorkspaceSize(
        t1, t2, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, comm.name().c_str(), nullptr,
        7, 2, 0, -1, 2, 0, 0, 0, to, nullptr, &ws, &ex);
    EXPECT(st == COMMFUSE_PARAM_NULLPTR && std::strstr(commfuseGetLastErrorMessage(), "x2Scale"),
           "C null x2Scale: %d %s", static_cast<int>(st), commfuseGetLastErrorMessage());
    st = commfuseAlltoAllQuantMatmul(nullptr, 0, nullptr, nullptr);
    EXPECT(st == COMMFUSE_PARAM_NULLPTR, "C null executor: %d", static_cast<int>(st));
    for (auto* t : {t1, t2, ts, to}) commfuseDestroyTensor(t);
  }

  // alltoall_matmul.
  const std::string mrank = "alltoall_matmul(rank " + std::to_string(comm.rank()) + ")";
  auto m = [&](const char* what, Status code, std::initializer_list<const char*> needles,
               TensorView x1, TensorView x2, TensorView out, commfuse::AlltoAllMatmulOptions mo) {
    expect_reject(mrank, what, code, needles, [&] {
      commfuse::AlltoAllMatmulPlan p(x1, x2, comm.name(), out, TensorView(), mo);
    });
  };
  const TensorView mx1(i, F16, {bs, h}), mx2(i, F16, {k, n}), mout(o, F16, {rows, n});
  commfuse::AlltoAllMatmulPlan(mx1, mx2, comm.name(), mout);  // accepted
  m("int8 x1", INV, {"x1 dtype"}, TensorView(i, I8, {bs, h}), mx2, mout, {});
  for (DType dt : {DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kBool})
    m("data-movement x1", INV, {"x1 dtype"}, TensorView(i, dt, {bs, h}), TensorView(i, dt, {k, n}),
      TensorView(o, dt, {rows, n}), {});
  m("x2 dtype", INV, {"x2 dtype"}, mx1, TensorView(i, BF16, {k, n}), mout, {});
  {  // packed_x2: x2's own packed form only, in C++ and through the C x2 descriptor
    const commfuse::PackedWeight pw(mx2), other(TensorView(i, F16, {k, n}, {n + 1, 1}));
    commfuse::AlltoAllMatmulOptions mo;
    mo.packed_x2 = &pw;
    commfuse::AlltoAllMatmulPlan(mx1, mx2, comm.name(), mout, TensorView(), mo);  // accepted
    mo.packed_x2 = &other;
    m("packed_x2 of another x2", INV, {"packed_x2 was packed from another x2"}, mx1, mx2, mout, mo);
    auto* t1 = commfuseCreateTensor(mx1.shape, 2, nullptr, COMMFUSE_FLOAT16, i);
    auto* t2 = commfuseCreateTensor(mx2.shape, 2, nullptr, COMMFUSE_FLOAT16, i);
    auto* to = commfuseCreateTensor(mout.shape, 2, nullptr, COMMFUSE_FLOAT16, o);
    const int64_t wide_strides[2] = {n + 1, 1};
    auto* tw = commfuseCreateTensor(mx2.shape, 2, wide_strides, COMMFUSE_FLOAT16, i);
    commfusePackedWeight_t* cw = commfuseCreatePackedWeight(tw, 0);
    commfuseSetTensorPackedWeight(t2, cw);
    uint64_t ws = 0;
    commfuseOpExecutor_t* ex = nullptr;
    const commfuseStatus_t st = commfuseAlltoAllMatmulGetWorkspaceSize(
        t1, t2, nullptr, comm.name().c_str(), nullptr, 0, 0, to, nullptr, &ws, &ex);
    EXPECT(st == COMMFUSE_PARAM_INVALID &&
               std::strstr(commfuseGetLastErrorMessage(), "packed_x2 was packed from another x2"),
           "C alltoall_matmul packed_x2 of another x2: %d %s", static_cast<int>(st),
           commfuseGetLastErrorMessage());
    for (auto* t : {t1, t2, to, tw}) commfuseDestroyTensor(t);
    commfuseDestroyPackedWeight(cw);
  }
  m("x2 dim 0", INV, {"x2 dim 0"}, mx1, TensorView(i, F16, {k + 2, n}), mout, {});
  m("output shape", INV, {"output shape"}, mx1, mx2, TensorView(o, F16, {rows, n + 1}), {});
  commfuse::AlltoAllMatmulOptions t1;
  t1.transpose_x1 = true;
  m("transposeX1", INV, {"transposeX1"}, mx1, mx2, mout, t1);
  commfuse::AlltoAllMatmulOptions ax;
  ax.all_to_all_axes = std::vector<int64_t>{0};
  m("axes", INV, {"alltoAllAxesOptional"}, mx1, mx2, mout, ax);
  if (R > 1) m("BS % R", INV, {"x1 dim 0 (BS)"}, TensorView(i, F16, {bs + 1, h}), mx2, mout, {});
  // The group is still usable after all these rejections? No: a rejection aborts the group
  // (SPEC §0), so nothing collective runs after this case.
  return 0;
}

}  // namespace optest
