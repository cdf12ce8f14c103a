// matmul_reduce_scatter, unfused (the reference of the algorithm list): the whole fp32
// partial product in one GEMM, reduce_scatter (fp32, rank order), then the bias once and
// one rounding. Same arithmetic as the fused schedule (SPEC §0).
#include "ops/common/epilogue.hpp"
#include "ops/matmul_reduce_scatter/plan.hpp"

namespace commfuse::ops {

void run_matmul_reduce_scatter_unfused(const MatmulReduceScatterPlanData& plan,
                                       comm::CommImpl& comm, void* workspace) {
  const MatmulReduceProblem& p = plan.problem;
  const PartialGemm gemm(plan.gemm, plan.problem, workspace);
  float* partial = matmul_reduce_partial(plan.gemm, p, workspace);
  float* reduced = partial + p.m * p.n;  // this rank's rows of the sum
  const int64_t rows = p.m / p.world_size;
  gemm.run(0, p.m, partial);
  comm.transport().reduce_scatter(partial, reduced, static_cast<uint64_t>(rows * p.n),
                                  DType::kFloat32);
  add_bias_and_round(reduced, rows, p.n, p.bias, matmul_reduce_bias32(plan.gemm, workspace),
                     p.output, p.out_dtype);
}

}  // namespace commfuse::ops
