// What MatmulReduceScatter and MatmulAllReduce share: both multiply the local x1 by the
// local x2 into an fp32 partial product, sum the partials across ranks in rank order, then
// add the bias once and round once (SPEC §0, §2).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cpu/matmul.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

struct MatmulReduceProblem {
  std::string group;
  int rank = 0;
  int world_size = 1;
  DType dtype = DType::kFloat32;  // x1, x2, output
  int64_t m = 0;                  // rows of x1 (leading dims flattened)
  int64_t k = 0;
  int64_t n = 0;
  const void* x1 = nullptr;  // (m, k) dense
  WeightLayout x2;
  BiasArg bias;
  void* output = nullptr;  // dense
  int64_t comm_turn = 0;
};

// The operand rules both ops share: reduce_op, comm_turn, x1 (2-D, or 3-D when
// allow_3d), x2, bias. Fills everything but output.
MatmulReduceProblem validate_matmul_operands(const OpContext& ctx, const TensorView& x1,
                                             const TensorView& x2,
                                             const MatmulReduceOptions& options, bool allow_3d);

// The local partial product x1 @ x2 in fp32, no bias (it is added once, after the sum).
// Null when m == 0.
std::shared_ptr<const kernels::cpu::MatmulPlan> plan_partial_product(const MatmulReduceProblem& p);

}  // namespace commfuse::ops
