// The C entry points compute what the C++ ones do (same bits), with caller-owned
// workspace and a transposed x2 given by strides.
#include <commfuse/commfuse.h>

#include <cstdlib>
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

  {  // all_gather_matmul, gather_output = false (no gatherOut)
    std::vector<uint8_t> out_c(m * R * n * 2, 0xCD), out_cpp(out_c.size(), 0xCD);
    auto cout = tensor({m * R, n}, nullptr, cdt, out_c.data());
    EXPECT(commfuseAllGatherMatmulGetWorkspaceSize(cx1.get(), cx2.get(), cbias.get(), group.c_str(),
                                                   0, 0, 1, cout.get(), nullptr, &ws,
                                                   &exec) == COMMFUSE_SUCCESS,
           "%s", commfuseGetLastErrorMessage());
    // The C workspace is the C++ plan's. Where this CPU has no native bf16 kernel (the plan
    // says so) it holds x2 and the bias widened to fp32; with one (AVX512-BF16, AMX) neither.
    commfuse::AllGatherMatmulOptions po;
    po.bias = bias_cpp;
    po.gather_output = false;
    const commfuse::AllGatherMatmulPlan cpp_plan(
        commfuse::TensorView(x1.data(), dt, {m, k}), x2_cpp, group, R,
        commfuse::TensorView(out_cpp.data(), dt, {m * R, n}), commfuse::TensorView(), po);
    const std::string how = cpp_plan.description();
    EXPECT(ws == cpp_plan.workspace_size(), "C workspace %llu, C++ %zu",
           static_cast<unsigned long long>(ws), cpp_plan.workspace_size());
    if (how.find("widened to float32") != std::string::npos)
      EXPECT(ws >= static_cast<uint64_t>((k * n + n) * 4), "workspace %llu for %s",
             static_cast<unsigned long long>(ws), how.c_str());
    else
      EXPECT(how.find("-> ref") == std::string::npos, "native bf16 on oneDNN's reference: %s",
             how.c_str());
    EXPECT(with_workspace(ws, exec, commfuseAllGatherMatmul) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    commfuse::AllGatherMatmulOptions o;
    o.bias = bias_cpp;
    o.gather_output = false;
    commfuse::all_gather_matmul(commfuse::TensorView(x1.data(), dt, {m, k}), x2_cpp, group, R,
                                commfuse::TensorView(out_cpp.data(), dt, {m * R, n}),
                                commfuse::TensorView(), o);
    EXPECT(out_c == out_cpp, "all_gather_matmul: C and C++ results differ");
  }
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
  {  // matmul_all_reduce, x1 (b, s, k)
    std::vector<uint8_t> out_c(m * n * 2, 0xCD), out_cpp(out_c.size(), 0xCD);
    auto cx13 = tensor({2, m / 2, k}, nullptr, cdt, const_cast<uint8_t*>(x1.data()));
    auto cout = tensor({2, m / 2, n}, nullptr, cdt, out_c.data());
    EXPECT(commfuseMatmulAllReduceGetWorkspaceSize(cx13.get(), cx2.get(), nullptr, group.c_str(),
                                                   "sum", 0, 1, cout.get(), &ws,
                                                   &exec) == COMMFUSE_SUCCESS,
           "%s", commfuseGetLastErrorMessage());
    EXPECT(with_workspace(ws, exec, commfuseMatmulAllReduce) == COMMFUSE_SUCCESS, "%s",
           commfuseGetLastErrorMessage());
    commfuse::matmul_all_reduce(commfuse::TensorView(x1.data(), dt, {2, m / 2, k}), x2_cpp, group,
                                commfuse::TensorView(out_cpp.data(), dt, {2, m / 2, n}));
    EXPECT(out_c == out_cpp, "matmul_all_reduce: C and C++ results differ");
  }
  return 0;
}

}  // namespace optest
