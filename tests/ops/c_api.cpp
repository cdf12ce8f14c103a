// The C entry points compute what the C++ ones do (same bits), with caller-owned
// workspace and a transposed x2 given by strides.
#include <commfuse/commfuse.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "numerics.hpp"

namespace optest {
namespace {

struct TensorDeleter {
  void operator()(commfuseTensor_t* t) const { commfuseDestroyTensor(t); }
};
using Tensor = std::unique_ptr<commfuseTensor_t, TensorDeleter>;

Tensor tensor(std::initializer_list<int64_t> shape, const int64_t* strides, commfuseDataType dt,
              void* data) {
  const std::vector<int64_t> s(shape);
  return Tensor(commfuseCreateTensor(s.data(), s.size(), strides, dt, data));
}

// Runs executor with a malloc'ed workspace of the size the first call reported.
template <typename Run>
commfuseStatus_t with_workspace(uint64_t size, commfuseOpExecutor_t* e, Run run) {
  void* ws = size ? std::malloc(size) : nullptr;
  const commfuseStatus_t st = run(ws, size, e, nullptr);
  std::free(ws);
  return st;
}

}  // namespace

int case_c_api(commfuse::Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  const int64_t m = 4, k = 32, n = 16;
  const DType dt = DType::kBFloat16;
  const auto cdt = static_cast<commfuseDataType>(dt);
  const auto x1 = encode(values(100 + me, m * k, false), dt);
  // x2 stored as (n, k); the descriptor (k, n) with strides (1, k) is its transposed view.
  const auto x2 = encode(values(200 + me, k * n, false), dt);
  const auto bias = encode(values(300, n, false), DType::kFloat32);
  const int64_t t_strides[] = {1, k};
  const commfuse::TensorView x2_cpp = commfuse::TensorView(x2.data(), dt, {n, k}).t();
  const commfuse::TensorView bias_cpp(bias.data(), DType::kFloat32, {n});
  auto cx1 = tensor({m, k}, nullptr, cdt, const_cast<uint8_t*>(x1.data()));
  auto cx2 = tensor({k, n}, t_strides, cdt, const_cast<uint8_t*>(x2.data()));
  auto cbias = tensor({n}, nullptr, COMMFUSE_FLOAT32, const_cast<uint8_t*>(bias.data()));
  const std::string group = comm.name();
  uint64_t ws = 0;
  commfuseOpExecutor_t* exec = nullptr;

  // all_gather_matmul, gather_output = false (no gatherOut); `packed`: the C++ call's
  // packed_x2 (the C descriptor cx2 then carries its own packed form of the same x2).
  auto all_gather_c_vs_cpp = [&](const char* what, const commfuse::PackedWeight* packed) {
    std::vector<uint8_t> out_c(m * R * n * 2, 0xCD), out_cpp(out_c.size(), 0xCD);
    auto cout = tensor({m * R, n}, nullptr, cdt, out_c.data());
    EXPECT(commfuseAllGatherMatmulGetWorkspaceSize(cx1.get(), cx2.get(), cbias.get(), group.c_str(),
                                                   0, 0, 1, cout.get(), nullptr, &ws,
                                                   &exec) == COMMFUSE_SUCCESS,
           "%s: %s", what, commfuseGetLastErrorMessage());
    // The C workspace is the C++ plan's. Where this CPU has no native bf16 kernel (the plan
    // says so) it holds x2 and the bias widened to fp32; with one (AVX512-BF16, AMX) neither.
    commfuse::AllGatherMatmulOptions po;
    po.bias = bias_cpp;
    po.gather_output = false;
    po.packed_x2 = packed;
    const commfuse::AllGatherMatmulPlan cpp_plan(
        commfuse::TensorView(x1.data(), dt, {m, k}), x2_cpp, group, R,
        commfuse::TensorView(out_cpp.data(), dt, {m * R, n}), commfuse::TensorView(), po);
    const std::string how = cpp_plan.description();
    EXPECT(ws == cpp_plan.workspace_size(), "%s: C workspace %llu, C++ %zu", what,
           static_cast<unsigned long long>(ws), cpp_plan.workspace_size());
    if (how.find("widened to float32") != std::string::npos)
      EXPECT(ws >= static_cast<uint64_t>((k * n + n) * 4), "workspace %llu for %s",
             static_cast<unsigned long long>(ws), how.c_str());
    else
      EXPECT(how.find("-> ref") == std::string::npos, "native bf16 on oneDNN's reference: %s",
             how.c_str());
    EXPECT(with_workspace(ws, exec, commfuseAllGatherMatmul) == COMMFUSE_SUCCESS, "%s: %s", what,
           commfuseGetLastErrorMessage());
    commfuse::all_gather_matmul(commfuse::TensorView(x1.data(), dt, {m, k}), x2_cpp, group, R,
                                commfuse::TensorView(out_cpp.data(), dt, {m * R, n}),
                                commfuse::TensorView(), po);
    EXPECT(out_c == out_cpp, "%s: C and C++ results differ", what);
  };
  all_gather_c_vs_cpp("all_gather_matmul", nullptr);
  {  // matmul_reduce_scatter over m·R rows
    const auto x1r = encode(values(400 + me, m * R * k, false), dt);
    auto cx1r = tensor({m * R, k}, nullptr, cdt, const_cast<uint8_t*>(x1r.data()));
    std::vector<uint8_t> out_c(m * n * 2, 0xCD), out_cpp(out_c.size(), 0xCD);
    auto cout = tensor({m, n}, nullptr, cdt, out_c.data());
    EXPECT(commfuseMatmulReduceScatterGetWorkspaceSize(cx1r.get(), cx2.get(), cbias.get(),
                                                       group.c_str(), "sum", 0, 1, cout.get(), &ws,
                                                       &exec) == COMMFUSE_SUCCESS,
           "%s", commfuseGetLastErrorMessage());
    EXPECT(with_workspace(ws, exec, commfuseMatmulReduceScatter) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    commfuse::MatmulReduceOptions o;
    o.bias = bias_cpp;
    commfuse::matmul_reduce_scatter(commfuse::TensorView(x1r.data(), dt, {m * R, k}), x2_cpp, group,
                                    R, commfuse::TensorView(out_cpp.data(), dt, {m, n}), o);
    EXPECT(out_c == out_cpp, "matmul_reduce_scatter: C and C++ results differ");
  }
  // matmul_all_reduce, x1 (b, s, k); `packed` as above.
  auto all_reduce_c_vs_cpp = [&](const char* what, const commfuse::PackedWeight* packed) {
    std::vector<uint8_t> out_c(m * n * 2, 0xCD), out_cpp(out_c.size(), 0xCD);
    auto cx13 = tensor({2, m / 2, k}, nullptr, cdt, const_cast<uint8_t*>(x1.data()));
    auto cout = tensor({2, m / 2, n}, nullptr, cdt, out_c.data());
    EXPECT(commfuseMatmulAllReduceGetWorkspaceSize(cx13.get(), cx2.get(), nullptr, group.c_str(),
                                                   "sum", 0, 1, cout.get(), &ws,
                                                   &exec) == COMMFUSE_SUCCESS,
           "%s: %s", what, commfuseGetLastErrorMessage());
    EXPECT(with_workspace(ws, exec, commfuseMatmulAllReduce) == COMMFUSE_SUCCESS, "%s: %s", what,
           commfuseGetLastErrorMessage());
    commfuse::MatmulReduceOptions o;
    o.packed_x2 = packed;
    commfuse::matmul_all_reduce(commfuse::TensorView(x1.data(), dt, {2, m / 2, k}), x2_cpp, group,
                                commfuse::TensorView(out_cpp.data(), dt, {2, m / 2, n}), o);
    EXPECT(out_c == out_cpp, "%s: C and C++ results differ", what);
  };
  all_reduce_c_vs_cpp("matmul_all_reduce", nullptr);
  {  // V2 (SPEC §6): A8W8 all_gather_matmul with an int32 bias, per-token x1 scale, fp32 out;
     // FP8 reducing ops into bfloat16; then the V2 call with a missing x2 scale.
    const auto q1 = encode(values(500 + me, m * R * k, false), DType::kInt8);
    const auto q2 = encode(values(600 + me, k * n, false), DType::kInt8);
    const std::vector<float> s1(static_cast<size_t>(m * R), 0.5f), s2(static_cast<size_t>(n), 2.0f);
    std::vector<int32_t> ibias(static_cast<size_t>(n), 3);
    auto cq1 = tensor({m, k}, nullptr, COMMFUSE_INT8, const_cast<uint8_t*>(q1.data()));
    auto cq2 = tensor({k, n}, nullptr, COMMFUSE_INT8, const_cast<uint8_t*>(q2.data()));
    auto cs1 = tensor({m}, nullptr, COMMFUSE_FLOAT32, const_cast<float*>(s1.data()));
    auto cs2 = tensor({n}, nullptr, COMMFUSE_FLOAT32, const_cast<float*>(s2.data()));
    auto cib = tensor({n}, nullptr, COMMFUSE_INT32, ibias.data());
    std::vector<float> out_c(static_cast<size_t>(m * R * n), -1), out_cpp(out_c.size(), -2);
    std::vector<uint8_t> g_c(static_cast<size_t>(m * R * k)), g_cpp(g_c.size());
    auto cout = tensor({m * R, n}, nullptr, COMMFUSE_FLOAT32, out_c.data());
    auto cg = tensor({m * R, k}, nullptr, COMMFUSE_INT8, g_c.data());
    EXPECT(commfuseAllGatherMatmulV2GetWorkspaceSize(cq1.get(), cq2.get(), cib.get(), cs1.get(),
                                                     cs2.get(), group.c_str(), 0, 0, 1, cout.get(),
                                                     cg.get(), &ws, &exec) == COMMFUSE_SUCCESS,
           "%s", commfuseGetLastErrorMessage());
    EXPECT(with_workspace(ws, exec, commfuseAllGatherMatmulV2) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    commfuse::AllGatherMatmulOptions o;
    o.bias = commfuse::TensorView(ibias.data(), DType::kInt32, {n});
    o.x1_scale = commfuse::TensorView(s1.data(), DType::kFloat32, {m});
    o.x2_scale = commfuse::TensorView(s2.data(), DType::kFloat32, {n});
    commfuse::all_gather_matmul(commfuse::TensorView(q1.data(), DType::kInt8, {m, k}),
                                commfuse::TensorView(q2.data(), DType::kInt8, {k, n}), group, R,
                                commfuse::TensorView(out_cpp.data(), DType::kFloat32, {m * R, n}),
                                commfuse::TensorView(g_cpp.data(), DType::kInt8, {m * R, k}), o);
    EXPECT(out_c == out_cpp && g_c == g_cpp, "all_gather_matmul V2: C and C++ results differ");

    const DType e4 = DType::kFloat8E4M3FN;
    const auto f1 = encode(values(700 + me, m * R * k, false), e4);
    const auto f2 = encode(values(800 + me, k * n, false), e4);
    auto cf1 = tensor({m * R, k}, nullptr, COMMFUSE_FLOAT8_E4M3FN, const_cast<uint8_t*>(f1.data()));
    auto cf2 = tensor({k, n}, nullptr, COMMFUSE_FLOAT8_E4M3FN, const_cast<uint8_t*>(f2.data()));
    auto cs1t = tensor({1}, nullptr, COMMFUSE_FLOAT32, const_cast<float*>(s1.data()));
    for (bool all_reduce : {false, true}) {
      const int64_t rows = all_reduce ? m * R : m;
      std::vector<uint8_t> rc(static_cast<size_t>(rows * n) * 2), rcpp(rc.size());
      auto co = tensor({rows, n}, nullptr, COMMFUSE_BFLOAT16, rc.data());
      const commfuseStatus_t st =
          all_reduce
              ? commfuseMatmulAllReduceV2GetWorkspaceSize(cf1.get(), cf2.get(), cbias.get(),
                                                          cs1t.get(), cs2.get(), group.c_str(),
                                                          "sum", 0, 1, co.get(), &ws, &exec)
              : commfuseMatmulReduceScatterV2GetWorkspaceSize(cf1.get(), cf2.get(), cbias.get(),
                                                              cs1t.get(), cs2.get(), group.c_str(),
                                                              "sum", 0, 1, co.get(), &ws, &exec);
      EXPECT(st == COMMFUSE_SUCCESS, "%s", commfuseGetLastErrorMessage());
      EXPECT(with_workspace(ws, exec,
                            all_reduce ? commfuseMatmulAllReduceV2
                                       : commfuseMatmulReduceScatterV2) == COMMFUSE_SUCCESS,
             "%s", commfuseGetLastErrorMessage());
      commfuse::MatmulReduceOptions ro;
      ro.bias = bias_cpp;
      ro.x1_scale = commfuse::TensorView(s1.data(), DType::kFloat32, {1});
      ro.x2_scale = commfuse::TensorView(s2.data(), DType::kFloat32, {n});
      const commfuse::TensorView a(f1.data(), e4, {m * R, k}), b(f2.data(), e4, {k, n});
      const commfuse::TensorView y(rcpp.data(), DType::kBFloat16, {rows, n});
      if (all_reduce)
        commfuse::matmul_all_reduce(a, b, group, y, ro);
      else
        commfuse::matmul_reduce_scatter(a, b, group, R, y, ro);
      EXPECT(rc == rcpp, "%s V2: C and C++ results differ",
             all_reduce ? "matmul_all_reduce" : "matmul_reduce_scatter");
    }
    // Every rank rejects (nothing is sent), so the communicator stays usable.
    EXPECT(commfuseAllGatherMatmulV2GetWorkspaceSize(
               cq1.get(), cq2.get(), nullptr, nullptr, nullptr, group.c_str(), 0, 0, 1, cout.get(),
               cg.get(), &ws, &exec) == COMMFUSE_PARAM_INVALID,
           "missing x2 scale: %s", commfuseGetLastErrorMessage());
    EXPECT(std::string(commfuseGetLastErrorMessage()).find("x2_scale is required") !=
               std::string::npos,
           "%s", commfuseGetLastErrorMessage());
  }
  {  // x2 packed ahead (commfuseCreatePackedWeight, attached to the x2 descriptor): the same
     // workspace and bits as the C++ call given its own packed form of x2; another tensor's
     // packed form is PARAM_INVALID.
    commfusePackedWeight_t* pw = commfuseCreatePackedWeight(cx2.get(), m * R);
    EXPECT(pw != nullptr, "%s", commfuseGetLastErrorMessage());
    const commfuse::PackedWeight cpp_pw(x2_cpp, m * R);
    EXPECT(commfusePackedWeightIsPacked(pw) == (cpp_pw.packed() ? 1 : 0),
           "C says packed %d, C++ %d", commfusePackedWeightIsPacked(pw), cpp_pw.packed());
    EXPECT(commfusePackedWeightIsPacked(nullptr) == -1, "IsPacked(NULL) is not -1");
    EXPECT(commfuseSetTensorPackedWeight(cx2.get(), pw) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    all_gather_c_vs_cpp("all_gather_matmul with packed x2", &cpp_pw);
    all_reduce_c_vs_cpp("matmul_all_reduce with packed x2", &cpp_pw);

    // The same packed form on a descriptor of another x2 (row-major over the same bytes).
    auto other = tensor({k, n}, nullptr, cdt, const_cast<uint8_t*>(x2.data()));
    auto cx13 = tensor({2, m / 2, k}, nullptr, cdt, const_cast<uint8_t*>(x1.data()));
    std::vector<uint8_t> out_r(m * n * 2, 0xCD);
    auto cor = tensor({2, m / 2, n}, nullptr, cdt, out_r.data());
    EXPECT(commfuseSetTensorPackedWeight(other.get(), pw) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    EXPECT(commfuseMatmulAllReduceGetWorkspaceSize(cx13.get(), other.get(), nullptr, group.c_str(),
                                                   "sum", 0, 1, cor.get(), &ws,
                                                   &exec) == COMMFUSE_PARAM_INVALID,
           "packed form of another x2 accepted: %s", commfuseGetLastErrorMessage());
    EXPECT(
        std::string(commfuseGetLastErrorMessage()).find("packed_x2 was packed from another x2") !=
            std::string::npos,
        "%s", commfuseGetLastErrorMessage());
    EXPECT(commfuseSetTensorPackedWeight(other.get(), nullptr) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    EXPECT(commfuseSetTensorPackedWeight(nullptr, pw) == COMMFUSE_PARAM_NULLPTR,
           "SetTensorPackedWeight(NULL) accepted");
    EXPECT(commfuseCreatePackedWeight(nullptr, 0) == nullptr, "CreatePackedWeight(NULL) made one");
    const int64_t bad_rows = -1;
    EXPECT(commfuseCreatePackedWeight(cx2.get(), bad_rows) == nullptr &&
               std::string(commfuseGetLastErrorMessage()).find("rows is -1") != std::string::npos,
           "rows -1: %s", commfuseGetLastErrorMessage());
    // The descriptor holds the packed form: its handle may go first, and the op still
    // reads it (the same bits); the dead handle is refused, never read.
    EXPECT(commfuseDestroyPackedWeight(pw) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    all_gather_c_vs_cpp("all_gather_matmul with packed x2 after its handle was destroyed", &cpp_pw);
    EXPECT(commfusePackedWeightIsPacked(pw) == -1, "IsPacked(destroyed) is not -1");
    EXPECT(commfuseDestroyPackedWeight(pw) == COMMFUSE_PARAM_INVALID &&
               std::strstr(commfuseGetLastErrorMessage(), "not a live packed weight") != nullptr,
           "packed weight destroyed twice: %s", commfuseGetLastErrorMessage());
    EXPECT(commfuseSetTensorPackedWeight(cx2.get(), pw) == COMMFUSE_PARAM_INVALID &&
               std::strstr(commfuseGetLastErrorMessage(), "packed is not a live") != nullptr,
           "destroyed packed weight attached: %s", commfuseGetLastErrorMessage());
    EXPECT(commfuseSetTensorPackedWeight(cx2.get(), nullptr) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
  }
  return 0;
}

}  // namespace optest
