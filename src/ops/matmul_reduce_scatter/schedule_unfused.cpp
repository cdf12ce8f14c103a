// matmul_reduce_scatter, unfused: this rank's partial x1 @ x2 in fp32, the transport's
// reduce_scatter in fp32 (it sums in rank order 0..R-1, SPEC §0), then the bias once and
// one rounding to the output dtype. Correct on every transport.
#include "ops/common/epilogue.hpp"
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse::ops {

void run_matmul_reduce_scatter_unfused(const MatmulReduceScatterPlanData& plan,
                                       comm::CommImpl& comm, void* workspace) {
  const MatmulReduceProblem& p = plan.problem;
  const int64_t rows = p.m / p.world_size;
  float* partial = static_cast<float*>(workspace);
  float* reduced = partial + p.m * p.n;
  float* bias32 = reduced + rows * p.n;
  if (plan.gemm) kernels::cpu::matmul(*plan.gemm, p.x1, p.x2.data, nullptr, partial);
  // Row block r of the partial product is contiguous, so block r goes to rank r as is.
  comm.transport().reduce_scatter(partial, reduced, static_cast<uint64_t>(rows * p.n),
                                  DType::kFloat32);
  add_bias_and_round(reduced, rows, p.n, p.bias, bias32, p.output, p.dtype);
}

}  // namespace commfuse::ops
