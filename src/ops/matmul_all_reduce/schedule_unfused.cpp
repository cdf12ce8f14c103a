// matmul_all_reduce, unfused: this rank's partial x1 @ x2 in fp32, the transport's
// all_reduce in fp32 (rank order 0..R-1, identical bits everywhere, SPEC §0), then the bias
// once and one rounding. Every rank rounds the same fp32 values the same way, so the
// output is bitwise identical on all ranks. Correct on every transport.
#include "ops/common/epilogue.hpp"
#include "ops/matmul_all_reduce/plan.hpp"

namespace commfuse::ops {

void run_matmul_all_reduce_unfused(const MatmulAllReducePlanData& plan, comm::CommImpl& comm,
                                   void* workspace) {
  const MatmulReduceProblem& p = plan.problem;
  float* partial = static_cast<float*>(workspace);
  float* bias32 = partial + p.m * p.n;
  if (plan.gemm) kernels::cpu::matmul(*plan.gemm, p.x1, p.x2.data, nullptr, partial);
  comm.transport().all_reduce(partial, partial, static_cast<uint64_t>(p.m * p.n), DType::kFloat32);
  add_bias_and_round(partial, p.m, p.n, p.bias, bias32, p.output, p.dtype);
}

}  // namespace commfuse::ops
