// alltoall_matmul's GEMM, the same in both schedules (the fused one on chunks of assembled
// rows, the unfused one on all of them): RowGemm over x2 prepared once per call.
#include "ops/alltoall_matmul/plan.hpp"

namespace commfuse::ops {

RowGemm alltoall_matmul_gemm(const AlltoAllMatmulPlanData& plan, void* workspace) {
  RowGemmShape s = plan.gemm;  // planned by descriptor: this call's pointers bound here
  s.b.data = plan.problem.x2;
  s.b.prepacked = plan.problem.packed_x2;
  s.bias = plan.problem.bias;
  return RowGemm(s, static_cast<uint8_t*>(workspace) + plan.gemm_offset);
}

void alltoall_matmul_rows(const AlltoAllMatmulProblem& p, const RowGemm& gemm, const void* perm,
                          int64_t r0, int64_t r1) {
  const size_t es = dtype_storage_bytes(p.dtype, 1);
  gemm.run(static_cast<const uint8_t*>(perm) + static_cast<size_t>(r0 * p.k()) * es, r1 - r0,
           static_cast<uint8_t*>(p.output) + static_cast<size_t>(r0 * p.n) * es);
}

}  // namespace commfuse::ops
