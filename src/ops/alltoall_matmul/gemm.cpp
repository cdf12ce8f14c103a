// alltoall_matmul's GEMM, the same call in both schedules (the fused one on chunks of
// assembled rows, the unfused one on all of them), so both give the same bits.
#include "kernels/cpu/matmul.hpp"
#include "ops/alltoall_matmul/plan.hpp"

namespace commfuse::ops {

void alltoall_matmul_rows(const AlltoAllMatmulProblem& p, const void* perm, int64_t r0,
                          int64_t r1) {
  const int64_t k = p.k();
  const size_t es = dtype_storage_bytes(p.dtype, 1);
  kernels::cpu::MatmulDesc d;
  d.m = r1 - r0;
  d.k = k;
  d.n = p.n;
  d.a_dtype = d.b_dtype = d.c_dtype = p.dtype;
  d.b_transposed = p.x2_transposed;
  d.lda = k;
  d.ldb = p.x2_transposed ? k : p.n;
  d.ldc = p.n;
  d.has_bias = p.bias.data != nullptr;
  d.bias_dtype = d.has_bias ? p.bias.dtype : DType::kFloat32;
  kernels::cpu::matmul(d, static_cast<const uint8_t*>(perm) + static_cast<size_t>(r0 * k) * es,
                       p.x2, p.bias.data,
                       static_cast<uint8_t*>(p.output) + static_cast<size_t>(r0 * p.n) * es);
}

}  // namespace commfuse::ops
