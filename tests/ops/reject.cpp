// Every rejection rule of SPEC §2 (and the API's own argument rules): the right status, a
// message naming the op, the rank and the argument, raised in the plan step, before any
// communication and without touching outputs.
#include <commfuse/commfuse.h>

#include <cstring>
#include <string>

#include "numerics.hpp"

namespace optest {
namespace {

using commfuse::Status;
using commfuse::TensorView;

void check_message(const char* what, const char* msg, std::initializer_list<const char*> needles) {
  for (const char* needle : needles)
    EXPECT(std::strstr(msg, needle) != nullptr, "%s: message lacks '%s': %s", what, needle, msg);
}

void expect_c(const char* what, commfuseStatus_t got, commfuseStatus_t code,
              std::initializer_list<const char*> needles) {
  EXPECT(got == code, "%s: status %d, expected %d: %s", what, static_cast<int>(got),
         static_cast<int>(code), commfuseGetLastErrorMessage());
  if (got == code) check_message(what, commfuseGetLastErrorMessage(), needles);
}

constexpr DType kF16 = DType::kFloat16;
constexpr DType kMoveOnly[] = {DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kBool};
constexpr int64_t kM = 4, kK = 16, kN = 8;

struct Buffers {
  std::vector<uint8_t> in = std::vector<uint8_t>(1 << 16, 0);
  std::vector<uint8_t> out = std::vector<uint8_t>(1 << 16, 0xCD);
  std::vector<uint8_t> gather = std::vector<uint8_t>(1 << 16, 0xCD);  // apart from out
  void* i() { return in.data(); }
  void* o() { return out.data(); }
  void* g() { return gather.data(); }
};

struct AgmArgs {
  TensorView x1, x2, output, gather_out;
  std::string group;
  int world = 1;
  commfuse::AllGatherMatmulOptions opt;
  void plan() const {
    commfuse::AllGatherMatmulPlan p(x1, x2, group, world, output, gather_out, opt);
  }
};

struct ReduceArgs {
  TensorView x1, x2, output;
  std::string group;
  int world = 1;
  commfuse::MatmulReduceOptions opt;
  void plan_rs() const { commfuse::MatmulReduceScatterPlan p(x1, x2, group, world, output, opt); }
  void plan_ar() const { commfuse::MatmulAllReducePlan p(x1, x2, group, output, opt); }
};

void reject_all_gather_matmul(commfuse::Comm& comm, Buffers& b, const std::string& rank) {
  const int R = comm.world_size();
  AgmArgs ok{TensorView(b.i(), kF16, {kM, kK}),
             TensorView(b.i(), kF16, {kK, kN}),
             TensorView(b.o(), kF16, {kM * R, kN}),
             TensorView(b.g(), kF16, {kM * R, kK}),
             comm.name(),
             R,
             {}};
  const char* op = "all_gather_matmul";
  const Status inv = Status::kParamInvalid;
  auto with = [&](auto mod) {
    AgmArgs a = ok;
    mod(a);
    return [a] { a.plan(); };
  };
  expect_error("agm unknown group", inv, {op, "unknown group", "no_such_group"},
               with([](AgmArgs& a) { a.group = "no_such_group"; }));
  expect_error("agm world_size", inv, {op, rank.c_str(), "world_size is 99"},
               with([](AgmArgs& a) { a.world = 99; }));
  expect_error("agm gather_index 1", inv, {op, rank.c_str(), "gather_index=1 is not supported"},
               with([](AgmArgs& a) { a.opt.gather_index = 1; }));
  expect_error("agm gather_index 2", inv, {op, rank.c_str(), "gather_index is 2"},
               with([](AgmArgs& a) { a.opt.gather_index = 2; }));
  for (int64_t turn : {-1, 65})
    expect_error("agm comm_turn", inv, {op, rank.c_str(), "comm_turn is"},
                 with([turn](AgmArgs& a) { a.opt.comm_turn = turn; }));
  expect_error("agm x1 absent", Status::kParamNullptr, {op, rank.c_str(), "x1 is null"},
               with([](AgmArgs& a) { a.x1 = TensorView(); }));
  expect_error("agm x1 null data", Status::kParamNullptr, {op, rank.c_str(), "x1 data is null"},
               with([](AgmArgs& a) { a.x1.data = nullptr; }));
  expect_error("agm x1 3-D", inv, {op, rank.c_str(), "x1 must be 2-D"}, with([&](AgmArgs& a) {
                 a.x1 = TensorView(b.i(), kF16, {1, kM, kK});
               }));
  expect_error("agm x1 int32", inv, {op, rank.c_str(), "x1 dtype is int32"},
               with([&](AgmArgs& a) { a.x1.dtype = DType::kInt32; }));
  // The data-movement dtypes (collectives only) are no matmul input either.
  for (DType t : kMoveOnly) {
    const std::string want = "x1 dtype is " + std::string(commfuse::dtype_name(t));
    expect_error("agm x1 data-movement dtype", inv,
                 {op, rank.c_str(), want.c_str(), "float16, bfloat16, float32"},
                 with([t](AgmArgs& a) { a.x1.dtype = t; }));
  }
  expect_error("agm x1 transposed", inv, {op, rank.c_str(), "x1 must be row-major"},
               with([&](AgmArgs& a) {
                 a.x1 = TensorView(b.i(), kF16, {kK, kM}).t();
               }));
  expect_error("agm k = 0", inv, {op, rank.c_str(), "k", ">= 1"}, with([&](AgmArgs& a) {
                 a.x1 = TensorView(b.i(), kF16, {kM, 0});
                 a.x2 = TensorView(b.i(), kF16, {0, kN});
               }));
  expect_error("agm x2 dtype", inv, {op, rank.c_str(), "x2 dtype is bfloat16", "float16"},
               with([](AgmArgs& a) { a.x2.dtype = DType::kBFloat16; }));
  expect_error("agm k mismatch", inv,
               {op, rank.c_str(), "x2 dim 0 is 12 but x1 dim 1 is 16 (k must match)"},
               with([&](AgmArgs& a) {
                 a.x2 = TensorView(b.i(), kF16, {12, kN});
               }));
  expect_error("agm x2 3-D", inv, {op, rank.c_str(), "x2 must be 2-D"}, with([&](AgmArgs& a) {
                 a.x2 = TensorView(b.i(), kF16, {1, kK, kN});
               }));
  expect_error("agm x2 strides", inv, {op, rank.c_str(), "x2 strides"}, with([&](AgmArgs& a) {
                 a.x2 = TensorView(b.i(), kF16, {kK, kN}, {2 * kN, 2});
               }));
  // Strides whose span passes 2^63 bytes: (k - 1)·2^62 elements wrapped to a few bytes, so
  // the call was planned (and the GEMM's row addresses wrapped).
  expect_error("agm x2 strides span", inv,
               {op, rank.c_str(), "x2 strides (4611686018427387904, 1) for shape",
                "span more than 2^63 - 1 bytes"},
               with([&](AgmArgs& a) {
                 a.x2 = TensorView(b.i(), kF16, {kK, kN}, {int64_t{1} << 62, 1});
               }));
  expect_error("agm output shape", inv, {op, rank.c_str(), "output shape is", "(m·R, n)"},
               with([&](AgmArgs& a) {
                 a.output = TensorView(b.o(), kF16, {kM, kN + 1});
               }));
  expect_error("agm output dtype", inv, {op, rank.c_str(), "output dtype is float32"},
               with([](AgmArgs& a) { a.output.dtype = DType::kFloat32; }));
  expect_error("agm output absent", Status::kParamNullptr, {op, rank.c_str(), "output is null"},
               with([](AgmArgs& a) { a.output = TensorView(); }));
  expect_error("agm gather_out shape", inv, {op, rank.c_str(), "gather_out shape is"},
               with([&](AgmArgs& a) {
                 a.gather_out = TensorView(b.g(), kF16, {kM, kK + 1});
               }));
  expect_error("agm gather_out dtype", inv, {op, rank.c_str(), "gather_out dtype is bfloat16"},
               with([](AgmArgs& a) { a.gather_out.dtype = DType::kBFloat16; }));
  expect_error("agm gather_out absent", Status::kParamNullptr,
               {op, rank.c_str(), "gather_out is null"},
               with([](AgmArgs& a) { a.gather_out = TensorView(); }));
  expect_error("agm gather_out not empty", inv, {op, rank.c_str(), "gather_out", "(0,)"},
               with([](AgmArgs& a) { a.opt.gather_output = false; }));
  expect_error("agm bias shape", inv, {op, rank.c_str(), "bias shape is"},
               with([&](AgmArgs& a) { a.opt.bias = TensorView(b.i(), kF16, {kN + 1}); }));
  expect_error("agm bias dtype", inv, {op, rank.c_str(), "bias dtype is bfloat16"},
               with([&](AgmArgs& a) { a.opt.bias = TensorView(b.i(), DType::kBFloat16, {kN}); }));
  // Accepted: fp32 bias, transposed x2, gather_output false with gather_out absent.
  AgmArgs a = ok;
  a.opt.bias = TensorView(b.i(), DType::kFloat32, {kN});
  a.x2 = TensorView(b.i(), kF16, {kN, kK}).t();
  a.opt.gather_output = false;
  a.gather_out = TensorView();
  commfuse::AllGatherMatmulPlan plan(a.x1, a.x2, a.group, a.world, a.output, a.gather_out, a.opt);
  // Where oneDNN has no native fp16 kernel (the plan says so) the workspace holds at least
  // x2 and the bias as fp32 (plus, for few rows per rank, the staged rows:
  // all_gather_matmul/plan.hpp).
  const std::string how = plan.description();
  EXPECT(how.find(op) != std::string::npos && how.find("gemm: ") != std::string::npos,
         "description: %s", how.c_str());
  if (how.find("float16 widened to float32") != std::string::npos)
    EXPECT(plan.workspace_size() >= static_cast<size_t>((kK * kN + kN) * 4), "workspace %zu",
           plan.workspace_size());
}

// SPEC §6 (quantized x1): each rule names its argument.
void reject_quant_all_gather_matmul(commfuse::Comm& comm, Buffers& b, const std::string& rank) {
  const int R = comm.world_size();
  const DType i8 = DType::kInt8, f32 = DType::kFloat32;
  auto* sc = reinterpret_cast<float*>(b.i());  // scales (values irrelevant: rejected at plan)
  AgmArgs ok{TensorView(b.i(), i8, {kM, kK}),
             TensorView(b.i(), i8, {kK, kN}),
             TensorView(b.o(), DType::kBFloat16, {kM * R, kN}),
             TensorView(b.g(), i8, {kM * R, kK}),
             comm.name(),
             R,
             {}};
  ok.opt.x2_scale = TensorView(sc, f32, {kN});
  const char* op = "all_gather_matmul";
  const Status inv = Status::kParamInvalid;
  auto with = [&](auto mod) {
    AgmArgs a = ok;
    mod(a);
    return [a] { a.plan(); };
  };
  expect_error("q x2 dtype", inv, {op, rank.c_str(), "x2 dtype is float8_e4m3fn", "A8W8"},
               with([](AgmArgs& a) { a.x2.dtype = DType::kFloat8E4M3FN; }));
  expect_error("q fp8 x2 int8", inv, {op, rank.c_str(), "x2 dtype is int8", "FP8"},
               with([](AgmArgs& a) {
                 a.x1.dtype = DType::kFloat8E5M2;
                 a.gather_out.dtype = DType::kFloat8E5M2;
                 a.opt.x2_scale = TensorView(a.opt.x2_scale->data, DType::kFloat32, {1});
               }));
  expect_error("q hif8 x2 e4m3", inv, {op, rank.c_str(), "x2 dtype is float8_e4m3fn", "HiF8"},
               with([](AgmArgs& a) {
                 a.x1.dtype = DType::kHiFloat8;
                 a.x2.dtype = DType::kFloat8E4M3FN;
               }));
  expect_error("q x2_scale missing", inv, {op, rank.c_str(), "x2_scale is required"},
               with([](AgmArgs& a) { a.opt.x2_scale.reset(); }));
  expect_error("q x2_scale int64", inv, {op, rank.c_str(), "x2_scale dtype int64", "not supported"},
               with([](AgmArgs& a) { a.opt.x2_scale->dtype = DType::kInt64; }));
  expect_error("q x2_scale bf16", inv, {op, rank.c_str(), "x2_scale dtype is bfloat16", "float32"},
               with([](AgmArgs& a) { a.opt.x2_scale->dtype = DType::kBFloat16; }));
  expect_error("q x2_scale shape", inv, {op, rank.c_str(), "x2_scale shape is (7,)"},
               with([sc](AgmArgs& a) { a.opt.x2_scale = TensorView(sc, DType::kFloat32, {7}); }));
  expect_error(
      "q x1_scale shape", inv, {op, rank.c_str(), "x1_scale shape is (5,)", "per token"},
      with([sc](AgmArgs& a) { a.opt.x1_scale = TensorView(sc, DType::kFloat32, {kM + 1}); }));
  expect_error("q fp8 x1_scale per token", inv,
               {op, rank.c_str(), "x1_scale shape is (4,)", "FP8 mode: one scale per tensor"},
               with([sc](AgmArgs& a) {
                 a.x1.dtype = a.x2.dtype = a.gather_out.dtype = DType::kFloat8E4M3FN;
                 a.opt.x1_scale = TensorView(sc, DType::kFloat32, {kM});
               }));
  expect_error("q scale in float mode", inv,
               {op, rank.c_str(), "x2_scale is given but x1 is float16"}, with([](AgmArgs& a) {
                 a.x1.dtype = a.x2.dtype = a.output.dtype = a.gather_out.dtype = kF16;
               }));
  expect_error("q x1_scale in float mode", inv,
               {op, rank.c_str(), "x1_scale is given but x1 is float16"}, with([sc](AgmArgs& a) {
                 a.x1.dtype = a.x2.dtype = a.output.dtype = a.gather_out.dtype = kF16;
                 a.opt.x2_scale.reset();
                 a.opt.x1_scale = TensorView(sc, DType::kFloat32, {1});
               }));
  expect_error("q output int8", inv,
               {op, rank.c_str(), "output dtype is int8", "bfloat16, float16 or float32"},
               with([](AgmArgs& a) { a.output.dtype = DType::kInt8; }));
  expect_error("q gather_out bf16", inv, {op, rank.c_str(), "gather_out dtype is bfloat16"},
               with([](AgmArgs& a) { a.gather_out.dtype = DType::kBFloat16; }));
  expect_error("q int32 bias in FP8", inv, {op, rank.c_str(), "bias dtype int32", "A8W8"},
               with([&](AgmArgs& a) {
                 a.x1.dtype = a.x2.dtype = a.gather_out.dtype = DType::kHiFloat8;
                 a.opt.bias = TensorView(b.i(), DType::kInt32, {kN});
               }));
  expect_error("q bias int8", inv, {op, rank.c_str(), "bias dtype is int8", "(or int32)"},
               with([&](AgmArgs& a) { a.opt.bias = TensorView(b.i(), DType::kInt8, {kN}); }));
  // Accepted: per-token (m, 1) x1 scale, (1, n) x2 scale, int32 bias, fp32 output, x2^T.
  AgmArgs a = ok;
  a.opt.x1_scale = TensorView(sc, f32, {kM, 1});
  a.opt.x2_scale = TensorView(sc, f32, {1, kN});
  a.opt.bias = TensorView(b.i(), DType::kInt32, {kN});
  a.output.dtype = f32;
  a.x2 = TensorView(b.i(), i8, {kN, kK}).t();
  commfuse::AllGatherMatmulPlan plan(a.x1, a.x2, a.group, a.world, a.output, a.gather_out, a.opt);
  const std::string how = plan.description();
  EXPECT(how.find("A8W8 -> float32") != std::string::npos, "description: %s", how.c_str());
  // The reducing ops: the same rules (one implementation), and the int32 bias is A8W8
  // all_gather_matmul's alone (their bias is added once, to the fp32 sum).
  ReduceArgs rs{TensorView(b.i(), i8, {kM * R, kK}),
                TensorView(b.i(), i8, {kK, kN}),
                TensorView(b.o(), DType::kBFloat16, {kM, kN}),
                comm.name(),
                R,
                {}};
  rs.opt.x2_scale = TensorView(sc, f32, {kN});
  ReduceArgs ar{TensorView(b.i(), DType::kFloat8E4M3FN, {2, kM, kK}),
                TensorView(b.i(), DType::kFloat8E4M3FN, {kK, kN}),
                TensorView(b.o(), DType::kBFloat16, {2, kM, kN}),
                comm.name(),
                R,
                {}};
  ar.opt.x2_scale = TensorView(sc, f32, {1});
  for (bool all_reduce : {false, true}) {
    const char* rop = all_reduce ? "matmul_all_reduce" : "matmul_reduce_scatter";
    auto rwith = [&](auto mod) {
      ReduceArgs r = all_reduce ? ar : rs;
      mod(r);
      return [r, all_reduce] { all_reduce ? r.plan_ar() : r.plan_rs(); };
    };
    expect_error(
        rop, inv, {rop, rank.c_str(), "bias dtype int32", "A8W8 all_gather_matmul"},
        rwith([&](ReduceArgs& r) { r.opt.bias = TensorView(b.i(), DType::kInt32, {kN}); }));
    expect_error(rop, inv, {rop, rank.c_str(), "x2_scale is required"},
                 rwith([](ReduceArgs& r) { r.opt.x2_scale.reset(); }));
    expect_error(rop, inv, {rop, rank.c_str(), "output dtype is int8"},
                 rwith([](ReduceArgs& r) { r.output.dtype = DType::kInt8; }));
    expect_error(rop, inv, {rop, rank.c_str(), "x2 dtype is hifloat8"},
                 rwith([](ReduceArgs& r) { r.x2.dtype = DType::kHiFloat8; }));
    expect_error(
        rop, inv, {rop, rank.c_str(), "x1_scale shape is (3,)"},
        rwith([sc](ReduceArgs& r) { r.opt.x1_scale = TensorView(sc, DType::kFloat32, {3}); }));
  }
  // A8W8 k past the exact int32 sum (131071 products of 128 x 128): the sum would wrap.
  // The buffers are real (a check that let it through would read them, not crash).
  {
    const int64_t k = 131072;
    std::vector<int8_t> x1(static_cast<size_t>(kM * R * k)), x2(static_cast<size_t>(k * kN));
    std::vector<int8_t> g(static_cast<size_t>(kM * R * k));
    AgmArgs a = ok;
    a.x1 = TensorView(x1.data(), i8, {kM, k});
    a.x2 = TensorView(x2.data(), i8, {k, kN});
    a.gather_out = TensorView(g.data(), i8, {kM * R, k});
    expect_error("q A8W8 k past int32", inv,
                 {op, rank.c_str(), "x1 dim 1 (k) is 131072", "only up to 131071"},
                 [a] { a.plan(); });
    ReduceArgs r = rs;
    r.x1 = TensorView(x1.data(), i8, {kM * R, k});
    r.x2 = TensorView(x2.data(), i8, {k, kN});
    expect_error("q A8W8 reduce k past int32", inv,
                 {"matmul_reduce_scatter", rank.c_str(), "(k) is 131072", "only up to 131071"},
                 [r] { r.plan_rs(); });
    a.x1 = TensorView(x1.data(), i8, {kM, k - 1});  // the largest k: accepted
    a.x2 = TensorView(x2.data(), i8, {k - 1, kN});
    a.gather_out = TensorView(g.data(), i8, {kM * R, k - 1});
    a.plan();
  }
  // Accepted: A8W8 with a per-token x1 scale over all rows, FP8 into float32.
  ReduceArgs a8 = rs;
  a8.opt.x1_scale = TensorView(sc, f32, {kM * R});
  a8.plan_rs();
  ReduceArgs f8 = ar;
  f8.output.dtype = f32;
  f8.plan_ar();
}

void reject_reducing(commfuse::Comm& comm, Buffers& b, const std::string& rank) {
  const int R = comm.world_size();
  const Status inv = Status::kParamInvalid;
  ReduceArgs rs{TensorView(b.i(), kF16, {kM * R, kK}),
                TensorView(b.i(), kF16, {kK, kN}),
                TensorView(b.o(), kF16, {kM, kN}),
                comm.name(),
                R,
                {}};
  ReduceArgs ar{TensorView(b.i(), kF16, {2, kM, kK}),
                TensorView(b.i(), kF16, {kK, kN}),
                TensorView(b.o(), kF16, {2, kM, kN}),
                comm.name(),
                R,
                {}};
  auto with = [](const ReduceArgs& base, bool all_reduce, auto mod) {
    ReduceArgs a = base;
    mod(a);
    return [a, all_reduce] { all_reduce ? a.plan_ar() : a.plan_rs(); };
  };
  for (bool all_reduce : {false, true}) {
    const ReduceArgs& ok = all_reduce ? ar : rs;
    const char* op = all_reduce ? "matmul_all_reduce" : "matmul_reduce_scatter";
    expect_error(op, inv, {op, "unknown group"},
                 with(ok, all_reduce, [](ReduceArgs& a) { a.group = "nope"; }));
    expect_error(op, inv, {op, rank.c_str(), "reduce_op is 'max'", "sum"},
                 with(ok, all_reduce, [](ReduceArgs& a) { a.opt.reduce_op = "max"; }));
    expect_error(op, inv, {op, rank.c_str(), "comm_turn is 65"},
                 with(ok, all_reduce, [](ReduceArgs& a) { a.opt.comm_turn = 65; }));
    expect_error(op, Status::kParamNullptr, {op, rank.c_str(), "x1 is null"},
                 with(ok, all_reduce, [](ReduceArgs& a) { a.x1 = TensorView(); }));
    expect_error(op, inv, {op, rank.c_str(), "x1 must be"},
                 with(ok, all_reduce, [&](ReduceArgs& a) {
                   a.x1 = TensorView(b.i(), kF16, {1, 1, kM, kK});
                 }));
    expect_error(op, inv, {op, rank.c_str(), "x1 dtype is int32"},
                 with(ok, all_reduce, [](ReduceArgs& a) { a.x1.dtype = DType::kInt32; }));
    for (DType t : kMoveOnly) {
      const std::string want = "x1 dtype is " + std::string(commfuse::dtype_name(t));
      expect_error(op, inv, {op, rank.c_str(), want.c_str()},
                   with(ok, all_reduce, [t](ReduceArgs& a) { a.x1.dtype = t; }));
    }
    expect_error(op, inv, {op, rank.c_str(), "x2 dtype is float32", "must match"},
                 with(ok, all_reduce, [](ReduceArgs& a) { a.x2.dtype = DType::kFloat32; }));
    expect_error(op, inv, {op, rank.c_str(), "x2 dim 0 is 15", "(k must match)"},
                 with(ok, all_reduce, [&](ReduceArgs& a) {
                   a.x2 = TensorView(b.i(), kF16, {kK - 1, kN});
                 }));
    expect_error(op, inv, {op, rank.c_str(), "output shape is"},
                 with(ok, all_reduce, [&](ReduceArgs& a) {
                   a.output = TensorView(b.o(), kF16, {kM + 1, kN});
                 }));
    expect_error(op, inv, {op, rank.c_str(), "output dtype is bfloat16"},
                 with(ok, all_reduce, [](ReduceArgs& a) { a.output.dtype = DType::kBFloat16; }));
    expect_error(op, inv, {op, rank.c_str(), "bias dtype is int8"},
                 with(ok, all_reduce,
                      [&](ReduceArgs& a) { a.opt.bias = TensorView(b.i(), DType::kInt8, {kN}); }));
  }
  const char* op = "matmul_reduce_scatter";
  expect_error(op, inv, {op, rank.c_str(), "world_size is 99"},
               with(rs, false, [](ReduceArgs& a) { a.world = 99; }));
  expect_error(op, inv, {op, rank.c_str(), "x1 must be 2-D"}, with(rs, false, [&](ReduceArgs& a) {
                 a.x1 = TensorView(b.i(), kF16, {1, kM * R, kK});
               }));
  if (R > 1)  // m % R: only a world of 2 or more can violate it
    expect_error(op, inv, {op, rank.c_str(), "multiple of the world size"},
                 with(rs, false, [&](ReduceArgs& a) {
                   a.x1 = TensorView(b.i(), kF16, {kM * R + 1, kK});
                 }));
  expect_error("matmul_all_reduce 3-D output", inv, {"matmul_all_reduce", "(b, s, n)"},
               with(ar, true, [&](ReduceArgs& a) {
                 a.output = TensorView(b.o(), kF16, {2 * kM, kN});
               }));
}

// Shapes near int64's limits: planned or rejected as not supported (nothing executes on
// these small buffers), never an overflow. Found by fuzz/: all_gather_matmul's plan multiplied x2's
// k·n by 4 in int64 (2^31 x 2^30 fp16); m·R (review of the same code) overflowed for m near 2^62 at
// R >= 3, and m·R·k (the gathered x1, staged in the workspace) for x1 (2^40 - 1, 2^22) at R = 3.
// An address only, for shapes no buffer could hold: planned or rejected, never touched. The
// inputs sit at address(0), the outputs at address(2^63), so that their claimed spans stay
// apart (the ops reject an output that shares bytes with an input).
void* address(uint64_t offset) {
  return reinterpret_cast<void*>(uintptr_t{4096} + offset);
}
constexpr uint64_t kOutputs = uint64_t{1} << 63;

void plan_huge_shapes(commfuse::Comm& comm, const std::string& rank) {
  const int R = comm.world_size();
  const int64_t k = int64_t{1} << 31, n = int64_t{1} << 30;
  commfuse::AllGatherMatmulOptions no_gather;
  no_gather.gather_output = false;
  // An x2 of 2^61 elements: "not supported" by the CPU GEMM (it takes < 2^31: oneDNN's
  // kernels divided by zero on such shapes), named by the op, never an overflow or a crash.
  expect_error("huge x2", Status::kParamInvalid,
               {"all_gather_matmul", rank.c_str(), "not supported", "x2"}, [&] {
                 commfuse::AllGatherMatmulPlan p(
                     TensorView(address(0), kF16, {kM, k}), TensorView(address(0), kF16, {k, n}),
                     comm.name(), R, TensorView(address(kOutputs), kF16, {kM * R, n}), TensorView(),
                     no_gather);
               });
  // The largest x2 it takes (2^31 - 1 elements) plans, with the widened fp32 copy of x2 in
  // its workspace where 16-bit inputs run widened.
  const int64_t k1 = 1, n1 = (int64_t{1} << 31) - 1;
  const commfuse::AllGatherMatmulPlan accepted(
      TensorView(address(0), kF16, {kM, k1}), TensorView(address(0), kF16, {k1, n1}), comm.name(),
      R, TensorView(address(kOutputs), kF16, {kM * R, n1}), TensorView(), no_gather);
  EXPECT(accepted.description().find("all_gather_matmul") != std::string::npos, "%s",
         accepted.description().c_str());
  // matmul_reduce_scatter's fp32 partial product (m·n in the workspace: R times its output's
  // elements, each twice as wide) past the largest buffer, while x1, x2 and output fit.
  const int64_t n3 = (int64_t{1} << 31) - 1, m3 = R * (int64_t{1} << 30);
  expect_error("mrs partial product overflow", Status::kParamInvalid,
               {"matmul_reduce_scatter", rank.c_str(), "fp32 partial product"}, [&] {
                 commfuse::MatmulReduceScatterPlan p(
                     TensorView(address(0), kF16, {m3, 1}), TensorView(address(0), kF16, {1, n3}),
                     comm.name(), R, TensorView(address(kOutputs), kF16, {m3 / R, n3}));
               });
  // matmul_all_reduce unfused keeps the collective's fp32 result next to the partial: an
  // m·n whose partial alone fits made the workspace size wrap (68 bytes reported).
  const int64_t m4 = 768614336404564649, n4 = 3;  // m4·n4·4 = 2^63 - 4 bytes
  expect_error("mar workspace overflow", Status::kParamInvalid,
               {"matmul_all_reduce", rank.c_str(), "twice the fp32 partial product"}, [&] {
                 commfuse::MatmulAllReducePlan p(TensorView(address(0), kF16, {m4, 2}),
                                                 TensorView(address(0), kF16, {2, n4}), comm.name(),
                                                 TensorView(address(kOutputs), kF16, {m4, n4}));
               });
  if (R < 3) return;  // fp16 rows (at most 2^62 - 1) times R = 2 still fit
  const int64_t m = (int64_t{1} << 62) - 1;
  expect_error("agm m·R overflow", Status::kParamInvalid,
               {"all_gather_matmul", rank.c_str(), "the gathered m·R rows", "exceed int64"}, [&] {
                 commfuse::AllGatherMatmulPlan p(TensorView(address(0), kF16, {m, 1}),
                                                 TensorView(address(0), kF16, {1, 1}), comm.name(),
                                                 R, TensorView(address(kOutputs), kF16, {1, 1}),
                                                 TensorView(), no_gather);
               });
  // x1 just under 2^63 bytes (m·k = 2^62 - 2^22 fp16 elements); 3·m·k overflows
  const int64_t m2 = (int64_t{1} << 40) - 1, k2 = int64_t{1} << 22;
  expect_error("agm m·R·k overflow", Status::kParamInvalid,
               {"all_gather_matmul", rank.c_str(), "the gathered m·R·k elements", "exceed int64"},
               [&] {
                 commfuse::AllGatherMatmulPlan p(
                     TensorView(address(0), kF16, {m2, k2}), TensorView(address(0), kF16, {k2, 1}),
                     comm.name(), R, TensorView(address(kOutputs), kF16, {m2 * R, 1}), TensorView(),
                     no_gather);
               });
}

void reject_c_api(commfuse::Comm& comm, Buffers& b, const std::string& rank) {
  const int R = comm.world_size();
  const auto f16 = COMMFUSE_FLOAT16;
  const int64_t s_x1[] = {kM, kK}, s_x2[] = {kK, kN}, s_bad_x2[] = {kK + 1, kN},
                s_out[] = {kM * R, kN}, s_g[] = {kM * R, kK}, s_neg[] = {-1, 2};
  EXPECT(commfuseCreateTensor(s_x1, 0, nullptr, f16, b.i()) == nullptr, "ndim 0 accepted");
  check_message("create ndim 0", commfuseGetLastErrorMessage(), {"ndim"});
  EXPECT(commfuseCreateTensor(s_neg, 2, nullptr, f16, b.i()) == nullptr, "negative accepted");
  check_message("create negative", commfuseGetLastErrorMessage(), {"shape[0] is -1"});
  EXPECT(commfuseCreateTensor(nullptr, 2, nullptr, f16, b.i()) == nullptr, "null shape accepted");
  commfuseTensor_t* x1 = commfuseCreateTensor(s_x1, 2, nullptr, f16, b.i());
  commfuseTensor_t* x2 = commfuseCreateTensor(s_x2, 2, nullptr, f16, b.i());
  commfuseTensor_t* bad_x2 = commfuseCreateTensor(s_bad_x2, 2, nullptr, f16, b.i());
  commfuseTensor_t* out = commfuseCreateTensor(s_out, 2, nullptr, f16, b.o());
  commfuseTensor_t* g = commfuseCreateTensor(s_g, 2, nullptr, f16, b.g());
  const std::string group = comm.name();
  const char* gn = group.c_str();
  uint64_t ws = 0;
  commfuseOpExecutor_t* e = nullptr;
  const char* op = "all_gather_matmul";
  expect_c(
      "c agm null x1",
      commfuseAllGatherMatmulGetWorkspaceSize(nullptr, x2, nullptr, gn, 0, 0, 1, out, g, &ws, &e),
      COMMFUSE_PARAM_NULLPTR, {op, rank.c_str(), "x1 is null"});
  expect_c(
      "c agm null workspaceSize",
      commfuseAllGatherMatmulGetWorkspaceSize(x1, x2, nullptr, gn, 0, 0, 1, out, g, nullptr, &e),
      COMMFUSE_PARAM_NULLPTR, {"workspaceSize"});
  expect_c(
      "c agm null group",
      commfuseAllGatherMatmulGetWorkspaceSize(x1, x2, nullptr, nullptr, 0, 0, 1, out, g, &ws, &e),
      COMMFUSE_PARAM_NULLPTR, {op, "group"});
  expect_c(
      "c agm unknown group",
      commfuseAllGatherMatmulGetWorkspaceSize(x1, x2, nullptr, "nope", 0, 0, 1, out, g, &ws, &e),
      COMMFUSE_PARAM_INVALID, {op, "unknown group 'nope'"});
  expect_c(
      "c agm k mismatch",
      commfuseAllGatherMatmulGetWorkspaceSize(x1, bad_x2, nullptr, gn, 0, 0, 1, out, g, &ws, &e),
      COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "x2 dim 0 is 17 but x1 dim 1 is 16"});
  expect_c("c agm gatherIndex",
           commfuseAllGatherMatmulGetWorkspaceSize(x1, x2, nullptr, gn, 1, 0, 1, out, g, &ws, &e),
           COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "gather_index=1 is not supported"});
  expect_c("c agm commTurn",
           commfuseAllGatherMatmulGetWorkspaceSize(x1, x2, nullptr, gn, 0, 99, 1, out, g, &ws, &e),
           COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "comm_turn is 99"});
  expect_c("c agm streamMode",
           commfuseAllGatherMatmulGetWorkspaceSize(x1, x2, nullptr, gn, 0, 0, 0, out, g, &ws, &e),
           COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "streamMode is 0"});
  EXPECT(e == nullptr, "an executor was returned with an error");
  op = "matmul_reduce_scatter";
  expect_c(
      "c mrs reduceOp",
      commfuseMatmulReduceScatterGetWorkspaceSize(x1, x2, nullptr, gn, "min", 0, 1, out, &ws, &e),
      COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "reduce_op is 'min'"});
  expect_c(
      "c mrs null reduceOp",
      commfuseMatmulReduceScatterGetWorkspaceSize(x1, x2, nullptr, gn, nullptr, 0, 1, out, &ws, &e),
      COMMFUSE_PARAM_NULLPTR, {op, "reduceOp"});
  op = "matmul_all_reduce";
  expect_c("c mar output shape",
           commfuseMatmulAllReduceGetWorkspaceSize(x1, x2, nullptr, gn, "sum", 0, 1, g, &ws, &e),
           COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "output shape is"});
  expect_c("c execute null executor", commfuseMatmulAllReduce(nullptr, 0, nullptr, nullptr),
           COMMFUSE_PARAM_NULLPTR, {"executor is null"});
  // An executor made for one op cannot run as another; it is consumed anyway.
  commfuseTensor_t* mar_out = commfuseCreateTensor(s_x1, 2, nullptr, f16, b.o());
  const int64_t s_out_small[] = {kM, kN};
  commfuseDestroyTensor(mar_out);
  mar_out = commfuseCreateTensor(s_out_small, 2, nullptr, f16, b.o());
  EXPECT(commfuseMatmulAllReduceGetWorkspaceSize(x1, x2, nullptr, gn, "sum", 0, 1, mar_out, &ws,
                                                 &e) == COMMFUSE_SUCCESS,
         "%s", commfuseGetLastErrorMessage());
  expect_c("c executor of another op", commfuseAllGatherMatmul(nullptr, 0, e, nullptr),
           COMMFUSE_PARAM_INVALID, {"made for matmul_all_reduce"});
  // Consumed: running or destroying it again is refused (no use of freed memory), and so is
  // a pointer GetWorkspaceSize never returned. Each is local: no peer takes part.
  const char* consumed = "already run or destroyed";
  expect_c("c executor run twice", commfuseMatmulAllReduce(nullptr, 0, e, nullptr),
           COMMFUSE_PARAM_INVALID, {"commfuseMatmulAllReduce", consumed});
  expect_c("c consumed executor destroyed", commfuseDestroyOpExecutor(e), COMMFUSE_PARAM_INVALID,
           {"commfuseDestroyOpExecutor", consumed});
  expect_c(
      "c not an executor",
      commfuseMatmulAllReduce(nullptr, 0, reinterpret_cast<commfuseOpExecutor_t*>(&ws), nullptr),
      COMMFUSE_PARAM_INVALID, {"not one that GetWorkspaceSize returned"});
  // Unexecuted executors are freed with commfuseDestroyOpExecutor, once.
  EXPECT(commfuseMatmulAllReduceGetWorkspaceSize(x1, x2, nullptr, gn, "sum", 0, 1, mar_out, &ws,
                                                 &e) == COMMFUSE_SUCCESS,
         "%s", commfuseGetLastErrorMessage());
  EXPECT(commfuseDestroyOpExecutor(e) == COMMFUSE_SUCCESS, "destroy executor");
  expect_c("c executor destroyed twice", commfuseDestroyOpExecutor(e), COMMFUSE_PARAM_INVALID,
           {consumed});
  expect_c("c destroyed executor run", commfuseMatmulAllReduce(nullptr, 0, e, nullptr),
           COMMFUSE_PARAM_INVALID, {consumed});
  // Handles are numbers looked up, not addresses: a destroyed descriptor, or a handle of
  // another kind, is refused naming the argument; destroying one twice is refused too.
  commfuseTensor_t* dead = commfuseCreateTensor(s_x1, 2, nullptr, f16, b.i());
  EXPECT(commfuseDestroyTensor(dead) == COMMFUSE_SUCCESS, "%s", commfuseGetLastErrorMessage());
  const char* not_live = "is not a live tensor descriptor";
  expect_c("c tensor destroyed twice", commfuseDestroyTensor(dead), COMMFUSE_PARAM_INVALID,
           {"commfuseDestroyTensor", not_live});
  op = "matmul_all_reduce";
  expect_c(
      "c destroyed x1",
      commfuseMatmulAllReduceGetWorkspaceSize(dead, x2, nullptr, gn, "sum", 0, 1, mar_out, &ws, &e),
      COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "x1 ", not_live});
  const int64_t axes[] = {-1, -2};
  commfuseIntArray_t* arr = commfuseCreateIntArray(axes, 2);
  expect_c("c int array as bias",
           commfuseMatmulAllReduceGetWorkspaceSize(x1, x2,
                                                   reinterpret_cast<const commfuseTensor_t*>(arr),
                                                   gn, "sum", 0, 1, mar_out, &ws, &e),
           COMMFUSE_PARAM_INVALID, {op, rank.c_str(), "bias ", not_live});
  EXPECT(commfuseDestroyIntArray(arr) == COMMFUSE_SUCCESS, "%s", commfuseGetLastErrorMessage());
  expect_c("c int array destroyed twice", commfuseDestroyIntArray(arr), COMMFUSE_PARAM_INVALID,
           {"commfuseDestroyIntArray", "is not a live int array"});
  expect_c("c set device of a destroyed tensor",
           commfuseSetTensorDevice(dead, COMMFUSE_DEVICE_CPU, 0), COMMFUSE_PARAM_INVALID,
           {"commfuseSetTensorDevice", "tensor ", not_live});
  EXPECT(commfuseDestroyTensor(nullptr) == COMMFUSE_SUCCESS, "destroy(NULL)");
  EXPECT(e == nullptr, "an executor was returned with an error");
  for (commfuseTensor_t* t : {x1, x2, bad_x2, out, g, mar_out}) commfuseDestroyTensor(t);
}

// The C layer's own checks of one rank's call (before its plan), an executor run as
// another op, and a spent executor (run, or destroyed, before) are told to the group like
// the plan's rejections: rank 1 gets the status, the
// peers, already executing matmul_all_reduce, fail at once naming rank 1, and the
// communicator stays usable.
void reject_peer_c_api(commfuse::Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  const auto f16 = COMMFUSE_FLOAT16;
  std::vector<uint8_t> in(1 << 12, 0), out(static_cast<size_t>(kM * kN) * 2, 0);
  std::vector<uint8_t> workspace(1 << 16);
  const int64_t s_x1[] = {kM, kK}, s_x2[] = {kK, kN}, s_out[] = {kM, kN};
  commfuseTensor_t* x1 = commfuseCreateTensor(s_x1, 2, nullptr, f16, in.data());
  commfuseTensor_t* x2 = commfuseCreateTensor(s_x2, 2, nullptr, f16, in.data());
  commfuseTensor_t* o = commfuseCreateTensor(s_out, 2, nullptr, f16, out.data());
  commfuseTensor_t* dead = commfuseCreateTensor(s_x1, 2, nullptr, f16, in.data());
  commfuseDestroyTensor(dead);
  const std::string group = comm.name();
  const char* gn = group.c_str();
  struct Mistake {
    const char* what;
    commfuseStatus_t code;
    const char* needle;
  };
  const Mistake mistakes[] = {
      {"null workspaceSize", COMMFUSE_PARAM_NULLPTR,
       "matmul_all_reduce(rank 1): workspaceSize (output) is null"},
      {"null reduceOp", COMMFUSE_PARAM_NULLPTR, "matmul_all_reduce(rank 1): reduceOp is null"},
      {"destroyed x1", COMMFUSE_PARAM_INVALID, "x1 is not a live tensor descriptor"},
      {"executor run as another op", COMMFUSE_PARAM_INVALID, "made for matmul_all_reduce"},
      {"executor run again", COMMFUSE_PARAM_INVALID, "already run or destroyed"},
      {"destroyed executor run", COMMFUSE_PARAM_INVALID, "already run or destroyed"},
  };
  commfuseOpExecutor_t* ran = nullptr;  // rank 1's executor of "run as another op"
  for (const Mistake& m : mistakes) {
    const std::string what = m.what;
    const bool wrong = me == 1;
    uint64_t ws = 0;
    commfuseOpExecutor_t* e = nullptr;
    commfuseStatus_t got = COMMFUSE_SUCCESS;
    if (wrong && what == "null workspaceSize")
      got =
          commfuseMatmulAllReduceGetWorkspaceSize(x1, x2, nullptr, gn, "sum", 0, 1, o, nullptr, &e);
    else if (wrong && what == "null reduceOp")
      got = commfuseMatmulAllReduceGetWorkspaceSize(x1, x2, nullptr, gn, nullptr, 0, 1, o, &ws, &e);
    else if (wrong && what == "destroyed x1")
      got = commfuseMatmulAllReduceGetWorkspaceSize(dead, x2, nullptr, gn, "sum", 0, 1, o, &ws, &e);
    else
      got = commfuseMatmulAllReduceGetWorkspaceSize(x1, x2, nullptr, gn, "sum", 0, 1, o, &ws, &e);
    if (got == COMMFUSE_SUCCESS) {
      EXPECT(ws <= workspace.size(), "%s: workspace %llu", m.what,
             static_cast<unsigned long long>(ws));
      // A spent executor's own call is over: the peers, in this one, must still hear of it.
      if (wrong && what == "executor run again") {
        commfuseDestroyOpExecutor(e);
        e = ran;
      } else if (wrong && what == "destroyed executor run") {
        EXPECT(commfuseDestroyOpExecutor(e) == COMMFUSE_SUCCESS, "destroy: %s",
               commfuseGetLastErrorMessage());
      }
      if (wrong && what == "executor run as another op") {
        ran = e;
        got = commfuseMatmulReduceScatter(workspace.data(), ws, e, nullptr);
      } else {
        got = commfuseMatmulAllReduce(workspace.data(), ws, e, nullptr);
      }
    }
    const char* msg = commfuseGetLastErrorMessage();
    if (wrong) {
      EXPECT(got == m.code, "rank 1, %s: status %d, expected %d: %s", m.what, static_cast<int>(got),
             static_cast<int>(m.code), msg);
      EXPECT(std::strstr(msg, m.needle) != nullptr, "rank 1, %s: '%s' lacks '%s'", m.what, msg,
             m.needle);
    } else {
      EXPECT(got == COMMFUSE_RUNTIME_ERROR && std::strstr(msg, "rank 1") != nullptr,
             "rank %d, %s: status %d, not RUNTIME_ERROR naming rank 1: %s", me, m.what,
             static_cast<int>(got), msg);
    }
    std::printf("rank %d, %s: got expected status %d: %s\n", me, m.what, static_cast<int>(got),
                msg);
  }
  std::vector<float> one(4, 1.0f), sum(4);
  comm.all_reduce(one.data(), sum.data(), one.size(), DType::kFloat32);
  EXPECT(sum[3] == static_cast<float>(R), "all_reduce after the failed calls gave %g", sum[3]);
  for (commfuseTensor_t* t : {x1, x2, o}) commfuseDestroyTensor(t);
}

}  // namespace

// commfuse::PackedWeight: its own argument checks, and an op given a packed form of another
// x2, or one with quantized x1 (not supported).
void reject_packed_x2(commfuse::Comm& comm, Buffers& b, const std::string& rank) {
  const int R = comm.world_size();
  const Status inv = Status::kParamInvalid;
  const char* pw = "PackedWeight: x2";
  expect_error("pw 3-D", inv, {pw, "must be 2-D"}, [&] {
    commfuse::PackedWeight w(TensorView(b.i(), kF16, {2, kK, kN}));
  });
  for (DType t : {DType::kFloat8E4M3FN, DType::kHiFloat8, DType::kInt32})
    expect_error("pw quantized dtype", inv,
                 {pw, "dtype is", "fp8 and HiFloat8 x2 are not supported"}, [&] {
                   commfuse::PackedWeight w(TensorView(b.i(), t, {kK, kN}));
                 });
  // int4 is unpacked whole, as the ops unpack it: a dense x2 only.
  expect_error("pw int4 with padding", inv, {pw, "is int4", "must be dense"}, [&] {
    commfuse::PackedWeight w(TensorView(b.i(), DType::kInt4, {kK, kN}, {kN + 2, 1}));
  });
  expect_error("pw null", Status::kParamNullptr, {"PackedWeight", "null"}, [&] {
    commfuse::PackedWeight w(TensorView(nullptr, kF16, {kK, kN}));
  });
  expect_error("pw strides", inv, {pw, "strides (2, 2)"}, [&] {
    commfuse::PackedWeight w(TensorView(b.i(), kF16, {kK, kN}, {2, 2}));
  });
  expect_error("pw rows", inv, {"PackedWeight: rows is -1"}, [&] {
    commfuse::PackedWeight w(TensorView(b.i(), kF16, {kK, kN}), -1);
  });
  commfuse::PackedWeight moved(TensorView(b.i(), kF16, {kK, kN}));
  commfuse::PackedWeight taker(std::move(moved));
  expect_error("pw moved from", inv, {"PackedWeight", "moved from"},
               [&] { (void)moved.packed(); });  // NOLINT(bugprone-use-after-move): tested

  // The ops: a packed form of this very x2 only.
  const TensorView x2(b.i(), kF16, {kK, kN});
  const commfuse::PackedWeight other(TensorView(b.i(), kF16, {kK, kN}, {kN + 1, 1}));
  const commfuse::PackedWeight transposed(TensorView(b.i(), kF16, {kN, kK}).t());
  const commfuse::PackedWeight elsewhere(TensorView(b.in.data() + 64, kF16, {kK, kN}));
  for (const commfuse::PackedWeight* w : {&other, &transposed, &elsewhere}) {
    AgmArgs a{TensorView(b.i(), kF16, {kM, kK}),
              x2,
              TensorView(b.o(), kF16, {kM * R, kN}),
              TensorView(b.g(), kF16, {kM * R, kK}),
              comm.name(),
              R,
              {}};
    a.opt.packed_x2 = w;
    expect_error("agm packed_x2 of another x2", inv,
                 {"all_gather_matmul", rank.c_str(), "packed_x2 was packed from another x2"},
                 [&] { a.plan(); });
    ReduceArgs r{TensorView(b.i(), kF16, {kM * R, kK}),
                 x2,
                 TensorView(b.o(), kF16, {kM, kN}),
                 comm.name(),
                 R,
                 {}};
    r.opt.packed_x2 = w;
    expect_error("mrs packed_x2 of another x2", inv,
                 {"matmul_reduce_scatter", rank.c_str(), "packed_x2 was packed from another x2"},
                 [&] { r.plan_rs(); });
    r.output = TensorView(b.o(), kF16, {kM * R, kN});
    expect_error("mar packed_x2 of another x2", inv,
                 {"matmul_all_reduce", rank.c_str(), "packed_x2 was packed from another x2"},
                 [&] { r.plan_ar(); });
  }
  // A moved-from PackedWeight holds nothing.
  AgmArgs mv{TensorView(b.i(), kF16, {kM, kK}),
             x2,
             TensorView(b.o(), kF16, {kM * R, kN}),
             TensorView(b.g(), kF16, {kM * R, kK}),
             comm.name(),
             R,
             {}};
  mv.opt.packed_x2 = &moved;  // NOLINT(bugprone-use-after-move): what is tested
  expect_error("agm packed_x2 moved from", inv,
               {"all_gather_matmul", rank.c_str(), "packed_x2 is a moved-from PackedWeight"},
               [&] { mv.plan(); });
  // Quantized x1 (A8W8) with a float x2's packed form, or an int8 form of another x2.
  const commfuse::PackedWeight f16(x2);
  const commfuse::PackedWeight other_int8(TensorView(b.in.data() + 64, DType::kInt8, {kK, kN}));
  auto* sc = reinterpret_cast<float*>(b.i());
  AgmArgs q{TensorView(b.i(), DType::kInt8, {kM, kK}),
            TensorView(b.i(), DType::kInt8, {kK, kN}),
            TensorView(b.o(), DType::kBFloat16, {kM * R, kN}),
            TensorView(b.g(), DType::kInt8, {kM * R, kK}),
            comm.name(),
            R,
            {}};
  q.opt.x2_scale = TensorView(sc, DType::kFloat32, {kN});
  for (const commfuse::PackedWeight* w : {&f16, &other_int8}) {
    q.opt.packed_x2 = w;
    expect_error("agm quantized packed_x2 of another x2", inv,
                 {"all_gather_matmul", rank.c_str(), "packed_x2 was packed from another x2"},
                 [&] { q.plan(); });
  }
}

int case_reject(commfuse::Comm& comm) {
  Buffers b;
  const std::string rank = "(rank " + std::to_string(comm.rank()) + ")";
  reject_all_gather_matmul(comm, b, rank);
  reject_quant_all_gather_matmul(comm, b, rank);
  reject_reducing(comm, b, rank);
  reject_c_api(comm, b, rank);
  plan_huge_shapes(comm, rank);
  reject_packed_x2(comm, b, rank);
  EXPECT(b.out == std::vector<uint8_t>(b.out.size(), 0xCD), "a rejected call wrote an output");
  return 0;
}

// Rank 1 passes x2 with the wrong k: it gets PARAM_INVALID from the plan, before any
// communication; the others, already executing, fail fast with RUNTIME_ERROR naming rank 1
// instead of waiting for the deadline.
int case_reject_peer(commfuse::Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  std::vector<uint8_t> in(1 << 14, 0), out(static_cast<size_t>(kM * R * kN) * 2, 0xCD);
  commfuse::AllGatherMatmulOptions opt;
  opt.gather_output = false;
  try {
    commfuse::all_gather_matmul(TensorView(in.data(), kF16, {kM, kK}),
                                TensorView(in.data(), kF16, {me == 1 ? kK + 1 : kK, kN}),
                                comm.name(), R, TensorView(out.data(), kF16, {kM * R, kN}),
                                TensorView(), opt);
    EXPECT(false, "rank %d: no error", me);
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT(me == 1, "rank %d got PARAM_INVALID: %s", me, e.what());
    std::printf("rank %d: got expected PARAM_INVALID: %s\n", me, e.what());
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT(me != 1, "rank 1 got RUNTIME_ERROR: %s", e.what());
    EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "does not name rank 1: %s", e.what());
    std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", me, e.what());
  }
  if (me == 1) EXPECT(out == std::vector<uint8_t>(out.size(), 0xCD), "rank 1's output was written");

  // Rank 1's one-call matmul_reduce_scatter plans, but its workspace (the fp32 partial of m·n
  // = 3·2^46 elements: more than the address space) cannot be allocated: RUNTIME_ERROR "out of
  // memory" there, and its peers, already executing with a small shape, fail at once naming
  // rank 1 (they waited for COMMFUSE_TIMEOUT_S before, and the communicator was lost). Rank 1's
  // buffers are never touched: nothing runs.
  const int64_t huge_m = int64_t{3} << 22, huge_n = int64_t{1} << 24;
  const bool huge = me == 1;
  const int64_t m = huge ? huge_m : kM * R, n = huge ? huge_n : kN;
  void* const x = huge ? address(0) : in.data();  // rank 1: addresses only, never touched
  void* const y = huge ? address(kOutputs) : out.data();
  try {
    commfuse::matmul_reduce_scatter(TensorView(x, kF16, {m, kK}), TensorView(x, kF16, {kK, n}),
                                    comm.name(), R, TensorView(y, kF16, {m / R, n}));
    EXPECT(false, "rank %d: no error", me);
  } catch (const commfuse::RuntimeFailure& e) {
    const char* want = huge ? "matmul_reduce_scatter(rank 1): out of memory allocating"
                            : "rank 1 rejected the call";
    EXPECT(std::strstr(e.what(), want) != nullptr, "rank %d: '%s' lacks '%s'", me, e.what(), want);
    std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", me, e.what());
  }
  // Nothing was sent: the communicator still works.
  std::vector<float> one(4, 1.0f), sum(4);
  comm.all_reduce(one.data(), sum.data(), one.size(), DType::kFloat32);
  EXPECT(sum[3] == static_cast<float>(R), "all_reduce after the failed call gave %g", sum[3]);
  reject_peer_c_api(comm);
  return 0;
}

}  // namespace optest
