// quant_reduce_scatter, unfused (the reference of the algorithm list): every rank
// dequantizes all its rows to fp32 (code x scale, one fp32 multiply), the fp32
// reduce_scatter sums block r of every rank in rank order into rank r, and the sum is
// rounded once to the output dtype. The same operations in the same order as the fused
// stream (the first rank's product, then += each later rank's), so the same bits (SPEC §4);
// 4 bytes per element on the wire instead of 33/32.
#include "kernels/cpu/dequant.hpp"
#include "ops/quant_reduce_scatter/plan.hpp"

namespace commfuse::ops {

void run_quant_reduce_scatter_unfused(const QuantReduceScatterPlanData& plan, comm::CommImpl& comm,
                                      void* workspace) {
  const QuantReduceProblem& p = plan.problem;
  auto* mine = static_cast<float*>(workspace);
  float* sum = mine + p.rows * p.h;
  dequantize_rows(p, mine);
  const auto count = static_cast<uint64_t>(p.rows / p.world_size * p.h);
  comm.transport().reduce_scatter(mine, sum, count, DType::kFloat32);
  kernels::cpu::store_f32_as(sum, p.output, p.out_dtype, count);
}

}  // namespace commfuse::ops
