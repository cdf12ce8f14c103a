// all_gather_matmul, quantized mode (SPEC §6): x1_scale rows travel with their x1 rows. Only
// the codes and one fp32 scale per row cross the wire: the scales in one small all_gather
// before the codes' stream, so every arriving block's scales are already there.
#include <algorithm>

#include "comm/transport.hpp"
#include "ops/all_gather_matmul/plan.hpp"

namespace commfuse::ops {

const float* gather_row_scales(const AllGatherMatmulPlanData& plan, comm::CommImpl& comm,
                               void* workspace) {
  const AllGatherMatmulProblem& p = plan.problem;
  auto* ws = static_cast<uint8_t*>(workspace);
  auto* mine = reinterpret_cast<float*>(ws + plan.scales_offset);
  auto* all = reinterpret_cast<float*>(ws + plan.gathered_scales_offset);
  const QuantScales& q = p.quant;
  if (q.x1_per_token)
    std::copy(q.x1_scale, q.x1_scale + p.m, mine);
  else
    std::fill(mine, mine + p.m, q.x1_scale != nullptr ? q.x1_scale[0] : 1.0f);
  comm.transport().all_gather(mine, all, static_cast<uint64_t>(p.m), DType::kFloat32);
  return all;
}

}  // namespace commfuse::ops
