// alltoall_matmul planning: the algorithm, and a home for the permuted rows when
// alltoAllOut is absent (unfused: also for the all_to_all's receive buffer).
#include "ops/alltoall_matmul/plan.hpp"

#include <algorithm>
#include <vector>

#include "comm/comm_impl.hpp"
#include "core/algorithm.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"

namespace commfuse::ops {

const char* schedule_name(AlltoAllMatmulSchedule s) {
  switch (s) {
    case AlltoAllMatmulSchedule::kFused:
      return "fused";
    case AlltoAllMatmulSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

namespace {

// x2 as the GEMM reads it: (R*H, N), or its (N, R*H) buffer with transposeX2, with the
// prepacked form if any (the plan's GEMM operand and part of the plan key).
WeightLayout x2_layout(const AlltoAllMatmulProblem& p) {
  WeightLayout x2;
  x2.data = p.x2;
  x2.n = p.n;
  x2.transposed = p.x2_transposed;
  x2.ld = p.x2_transposed ? p.k() : p.n;
  x2.prepacked = p.packed_x2;
  return x2;
}

std::string describe_problem(const AlltoAllMatmulProblem& p) {
  return detail::cat(kAlltoAllMatmulOp, "(rank ", p.rank, ") BS=", p.bs, " H=", p.h, " N=", p.n,
                     " R=", p.world_size, " ", dtype_name(p.dtype));
}

}  // namespace

AlltoAllMatmulPlanData plan_alltoall_matmul(AlltoAllMatmulProblem problem) {
  AlltoAllMatmulPlanData plan;
  plan.problem = std::move(problem);
  const AlltoAllMatmulProblem& p = plan.problem;
  const std::vector<AlgorithmEntry> list{{"fused", ""}, {"unfused", ""}};
  plan.schedule = static_cast<AlltoAllMatmulSchedule>(choose_algorithm(
      kAlltoAllMatmulOp, [&] { return describe_problem(p); }, list));
  const size_t rows_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.rows() * p.k()));
  const bool unfused = plan.schedule == AlltoAllMatmulSchedule::kUnfused;
  plan.perm_offset = unfused ? (rows_bytes + 63) / 64 * 64 : 0;
  if (p.all_to_all_out == nullptr)
    plan.workspace_bytes = plan.perm_offset + rows_bytes;
  else if (unfused)
    plan.workspace_bytes = rows_bytes;
  RowGemmShape& g = plan.gemm;
  g.dtype = g.c_dtype = p.dtype;
  g.k = p.k();
  g.n = p.n;
  g.b = x2_layout(p);
  g.bias = p.bias;
  // The fused schedule's chunks: gemm_chunk_rows (all rows on shm), each possibly a piece
  // longer (the unfused one: all rows in one GEMM). Either way more than a few rows unless
  // all are few, so both schedules widen (or read in place) alike and give the same bits.
  // Off shm one piece (256 rows) where the chunks read x2 packed once per call: small
  // chunks then cost the GEMM little and overlap more of the transfer. Where they read x2
  // as given (fp32, or fp16/bf16 widened: no native kernel) each GEMM call repacks all of
  // it, and 1024-row chunks stay. MPI/TCP, W = 2, bf16, BS 4096, H 2048 (AMX Xeon): fused /
  // the bf16 path 0.97-0.98 at N 4096 and 1.00 at N 1024 in 1024-row chunks, 1.06-1.09 and
  // 1.09 in 256-row ones; under the avx2 cap (widened), BS 2048, N 4096: 1.00 in 1024-row
  // chunks, 0.80 in 256-row ones. (The quantized op measured no gain: 1024 stays.)
  comm::CommImpl& comm = find_comm(p.group).impl();
  auto plan_gemm = [&](int64_t chunk) {
    g.block_rows = chunk;
    g.max_rows = std::min(p.rows(), chunk + kPieceRows);
    plan_row_gemm(g);
  };
  plan_gemm(unfused ? p.rows() : gemm_chunk_rows(comm, p.rows(), kPieceRows));
  if (!unfused && !(g.packed && g.full_block_packed)) plan_gemm(gemm_chunk_rows(comm, p.rows()));
  plan.gemm_offset = (plan.workspace_bytes + 63) / 64 * 64;
  plan.workspace_bytes = plan.gemm_offset + row_gemm_workspace_bytes(g);
  return plan;
}

namespace {

PlanKey plan_key(const AlltoAllMatmulProblem& p) {
  PlanKey key(kAlltoAllMatmulOp, p.group);
  key.add(p.rank).add(p.world_size).add(static_cast<int64_t>(p.dtype)).add(p.bs).add(p.h);
  key.add(p.n).add(x2_layout(p)).add(p.bias).add(p.all_to_all_out != nullptr ? 1 : 0);
  return key;
}

}  // namespace

AlltoAllMatmulPlanData plan_alltoall_matmul_cached(AlltoAllMatmulProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<AlltoAllMatmulPlanData>(kAlltoAllMatmulOp);
  const PlanKey key = plan_key(problem);
  return plan_cached(*cache, key, std::move(problem),
                     [](const AlltoAllMatmulProblem& p) { return plan_alltoall_matmul(p); });
}

std::string describe(const AlltoAllMatmulPlanData& plan) {
  return detail::cat(describe_problem(plan.problem), ", schedule ", schedule_name(plan.schedule),
                     ", workspace ", plan.workspace_bytes,
                     " bytes; gemm: ", describe_row_gemm(plan.gemm, plan.gemm.block_rows));
}

}  // namespace commfuse::ops
