// quant_all_reduce, unfused (the reference of the algorithm list): every rank dequantizes its
// own rows to fp32 (code x scale, one fp32 multiply), the fp32 all_reduce sums them in rank
// order, and the sum is rounded once to the output dtype. The same operations in the same
// order as the fused schedules, so the same bits (SPEC §4); R times the bytes on the wire.
#include "kernels/cpu/dequant.hpp"
#include "ops/quant_all_reduce/plan.hpp"

namespace commfuse::ops {

void run_quant_all_reduce_unfused(const QuantAllReducePlanData& plan, comm::CommImpl& comm,
                                  void* workspace) {
  const QuantReduceProblem& p = plan.problem;
  auto* mine = static_cast<float*>(workspace);
  float* sum = mine + p.rows * p.h;
  dequantize_rows(p, mine);
  const auto count = static_cast<uint64_t>(p.rows * p.h);
  comm.transport().all_reduce(mine, sum, count, DType::kFloat32);
  kernels::cpu::store_f32_as(sum, p.output, p.out_dtype, count);
}

}  // namespace commfuse::ops
