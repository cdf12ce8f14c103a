// alltoall_quant_matmul planning: the algorithm, the GEMM path for the combination's value
// bounds and the workspace layout.
#include <algorithm>
#include <string_view>
#include <vector>

#include "core/params.hpp"

#include "core/algorithm.hpp"
#include "kernels/cpu/quant_per_token.hpp"
#include "kernels/cpu/small_m_int_gemm.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {
namespace {

size_t take(size_t& at, size_t bytes) {
  const size_t off = at;
  at = (at + bytes + 63) / 64 * 64;
  return off;
}

}  // namespace

const char* schedule_name(AlltoAllQuantMatmulSchedule s) {
  switch (s) {
    case AlltoAllQuantMatmulSchedule::kFused:
      return "fused";
    case AlltoAllQuantMatmulSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

int64_t gemm_chunk_rows(comm::CommImpl& comm, int64_t rows, int64_t off_shm_rows) {
  const int64_t v = params::get_int("COMMFUSE_ALLTOALL_GEMM_ROWS");
  if (v > 0) return std::min(rows, v);
  return std::string_view(comm.transport().name()) == "shm" ? rows : std::min(rows, off_shm_rows);
}

AlltoAllQuantMatmulPlanData plan_alltoall_quant_matmul(AlltoAllQuantMatmulProblem problem) {
  namespace cpu = kernels::cpu;
  AlltoAllQuantMatmulPlanData plan;
  plan.problem = std::move(problem);
  const AlltoAllQuantMatmulProblem& p = plan.problem;
  const int64_t R = p.world_size, rows = p.rows(), k = p.k();
  const std::vector<AlgorithmEntry> list{{"fused", ""}, {"unfused", ""}};
  plan.schedule = static_cast<AlltoAllQuantMatmulSchedule>(choose_algorithm(
      kAlltoAllQuantMatmulOp,
      [&] {
        return detail::cat(kAlltoAllQuantMatmulOp, "(rank ", p.rank, ") ", combo_name(p.combo),
                           " x1 ", dtype_name(p.x1_dtype), " BS=", p.bs, " H=", p.h, " N=", p.n,
                           " R=", R);
      },
      list));
  const bool unfused = plan.schedule == AlltoAllQuantMatmulSchedule::kUnfused;
  switch (p.combo) {
    case QuantCombo::kA16W8:
      plan.qmax = plan.a_max = cpu::kInt8QuantMax;
      plan.b_max = 127;  // int8 weights are symmetric in practice but may hold -128
      break;
    case QuantCombo::kA16W4:
      plan.qmax = plan.a_max = cpu::kInt4QuantMax;  // activations in the int4 range
      plan.b_max = 8;
      break;
    case QuantCombo::kA4W4:
      plan.a_max = plan.b_max = 8;
      break;
  }
  // A -128 weight would need b_max 128; the bound only has to be an upper bound.
  if (p.combo == QuantCombo::kA16W8) plan.b_max = 128;
  // The unfused reference runs one GEMM over all rows, after the permute and quantize passes.
  plan.gemm_rows = unfused ? rows : gemm_chunk_rows(find_comm(p.group).impl(), rows);
  // A4W4: one GEMM per source segment (H of the K rows of x2), each with its own token
  // scale; x2 is then prepared (packed or widened) segment by segment.
  const bool a4w4 = p.combo == QuantCombo::kA4W4;
  const cpu::IntMatmulDesc d = int_gemm_desc(plan, rows, a4w4 ? p.h : k);
  plan.small_m = p.combo == QuantCombo::kA16W8 && cpu::direct_int8_kernel_pays(rows);
  plan.path = plan.small_m ? cpu::IntMatmulPath::kS8  // unused: no plan, nothing prepared
                           : cpu::choose_int_matmul_path(d.a_max, d.b_max);
  if (plan.path == cpu::IntMatmulPath::kS8 && !plan.small_m) {
    // The planner's own answer: an x2 beyond the s8 kernel's 32-bit sizes takes the exact
    // f32-blocked path (int_matmul.cpp), which then needs x2 prepared below.
    cpu::IntMatmulDesc full = d;
    full.m = 0;  // the path only
    // A4W4's segments of a transposed x2 lie K apart: the kernel indexes all of N x K.
    if (a4w4 && p.x2_transposed) full.k = full.lda = k;
    plan.path = cpu::path_of(*cpu::plan_int_matmul(full));
  }
  // x2 packed once per execute into the s8 kernel's blocked layout where that pays
  // (int_matmul.hpp: int8_packing_pays, judged on the unpacked schedule's calls). Packed,
  // the fused schedule then runs its GEMM in blocks of block_rows (plan.hpp:
  // epilogue_rows), at least kMinEpilogueRows so that no block streams x2 for a few rows.
  const int64_t unpacked_calls = (rows + plan.gemm_rows - 1) / std::max<int64_t>(1, plan.gemm_rows);
  const int64_t block_rows =
      std::clamp<int64_t>(kEpilogueBytes / (4 * p.n), kMinEpilogueRows,
                          std::max<int64_t>(kMinEpilogueRows, plan.gemm_rows));
  if (plan.path == cpu::IntMatmulPath::kS8 && !plan.small_m) {
    cpu::IntMatmulDesc full = d;
    full.m = unfused ? plan.gemm_rows : std::min(block_rows, plan.gemm_rows);
    full.b_packed = true;
    plan.full_gemm = cpu::plan_int_matmul(full);
    plan.b_packed = cpu::int8_packing_pays(*plan.full_gemm, unpacked_calls > 1, plan.gemm_rows);
    // Prepared ahead (PackedWeight): packed b costs nothing per call, so it is read wherever
    // the blocks' plan reads the layout prepared.
    const PackedWeightImpl* pre = p.packed_x2;
    if (pre != nullptr && pre->int_plan && cpu::same_prepared_b(*plan.full_gemm, *pre->int_plan))
      plan.b_packed = plan.b_prepacked = true;
    if (!plan.b_packed) plan.full_gemm.reset();
  }
  // 0: each chunk's GEMM in one call (its epilogue after it).
  plan.epilogue_rows = plan.b_packed && !unfused ? block_rows : 0;
  if (cpu::always_prepares_b(plan.path)) {
    // prepare_b widens (f32-blocked) or packs (avx2-madd16) all of x2 (K x N; A4W4: each
    // segment's H x N) at once, and every block's plan takes the same path (int_gemm_desc
    // forces it: a block's own size check might pass and read the prepared x2 as int8).
    plan.full_gemm = cpu::plan_int_matmul(int_gemm_desc(plan, rows, d.k));
    // x2 prepared ahead (PackedWeight on this path): the same layout.
    const PackedWeightImpl* pre = p.packed_x2;
    plan.b_prepacked = !a4w4 && pre != nullptr && pre->int_plan &&
                       cpu::same_prepared_b(*plan.full_gemm, *pre->int_plan);
  }
  const bool prepared = plan.b_packed || cpu::always_prepares_b(plan.path);
  if (prepared && a4w4)
    plan.b_segment_bytes = (cpu::prepared_b_bytes(*plan.full_gemm) + 63) / 64 * 64;

  QuantWorkspace& w = plan.ws;
  size_t at = 0;
  // A chunk may end up to one piece past gemm_rows.
  const size_t gr = static_cast<size_t>(std::min(rows, plan.gemm_rows + kPieceRows)),
               n = static_cast<size_t>(p.n);
  if (unfused) {  // the received blocks and the permuted rows, both rows x K of x1's storage
    const size_t rows_bytes = dtype_storage_bytes(p.x1_dtype, static_cast<size_t>(rows * k));
    w.recv = take(at, rows_bytes);
    w.recv_scales =
        take(at, p.combo == QuantCombo::kA4W4 ? sizeof(float) * static_cast<size_t>(rows * R) : 0);
    w.perm = take(at, p.all_to_all_out == nullptr ? rows_bytes : 0);
  }
  w.q = take(at, static_cast<size_t>(rows * k));
  w.scales =
      take(at, sizeof(float) * static_cast<size_t>(p.combo == QuantCombo::kA4W4 ? rows * R : rows));
  const size_t kn = static_cast<size_t>(k) * n;
  w.b_unpacked = take(at, prepared && p.combo != QuantCombo::kA16W8 ? kn : 0);
  w.b = take(at, plan.b_prepacked                ? 0
                 : a4w4 && prepared              ? static_cast<size_t>(R) * plan.b_segment_bytes
                 : prepared                      ? cpu::prepared_b_bytes(*plan.full_gemm)
                 : p.combo == QuantCombo::kA16W8 ? 0
                                                 : kn);  // int4 unpacked to int8
  // A chunk's sums, or one block's where the chunk runs in blocks (epilogue_rows).
  const size_t acc_rows =
      plan.epilogue_rows > 0 ? std::min(gr, static_cast<size_t>(plan.epilogue_rows)) : gr;
  w.acc = take(at, acc_rows * n * sizeof(int32_t));
  w.yacc = take(at, a4w4 ? acc_rows * n * sizeof(float) : 0);
  w.row = take(at, static_cast<size_t>(k) * sizeof(float));
  w.out_row = take(at, n * sizeof(float));
  w.smooth = take(at, p.smooth ? static_cast<size_t>(k) * sizeof(float) : 0);
  w.bias = take(at, n * sizeof(float));
  w.total = at;
  return plan;
}

kernels::cpu::IntMatmulDesc int_gemm_desc(const AlltoAllQuantMatmulPlanData& plan, int64_t m,
                                          int64_t kk) {
  const AlltoAllQuantMatmulProblem& p = plan.problem;
  kernels::cpu::IntMatmulDesc d;
  d.m = m;
  d.k = kk;
  d.n = p.n;
  d.lda = kk;  // A4W4's activations are stored segment by segment (QuantGemm::q_segment)
  d.ldb = p.x2_transposed ? p.k() : p.n;
  d.ldc = p.n;
  d.b_transposed = p.x2_transposed;
  d.a_max = plan.a_max;
  d.b_max = plan.b_max;
  d.b_packed = plan.b_packed;
  if (kernels::cpu::always_prepares_b(plan.path))
    d.force_path = plan.path;  // x2 is prepared for this path
  return d;
}

std::string describe(const AlltoAllQuantMatmulPlanData& plan) {
  const AlltoAllQuantMatmulProblem& p = plan.problem;
  return detail::cat(kAlltoAllQuantMatmulOp, "(rank ", p.rank, "): ", combo_name(p.combo),
                     " BS=", p.bs, " H=", p.h, " N=", p.n, " R=", p.world_size, ", algorithm ",
                     schedule_name(plan.schedule), ", GEMM chunks of ", plan.gemm_rows,
                     " rows, workspace ", plan.ws.total, " bytes; int gemm: ",
                     plan.small_m     ? std::string(kernels::cpu::small_m_int_gemm_description())
                     : plan.full_gemm ? kernels::cpu::describe(*plan.full_gemm)
                                      : std::string(kernels::cpu::int_matmul_path_name(plan.path)),
                     plan.b_prepacked ? ", x2 prepacked (PackedWeight)" : "");
}

namespace {

PlanKey plan_key(const AlltoAllQuantMatmulProblem& p) {
  PlanKey key(kAlltoAllQuantMatmulOp, p.group);
  key.add(p.rank).add(p.world_size).add(static_cast<int64_t>(p.combo));
  key.add(static_cast<int64_t>(p.x1_dtype)).add(static_cast<int64_t>(p.out_dtype)).add(p.bs);
  key.add(p.h).add(p.n).add(p.x2_transposed ? 1 : 0).add(p.x2_scale != nullptr ? 1 : 0);
  key.add(p.smooth != nullptr ? 1 : 0).add(p.token_scale != nullptr ? 1 : 0).add(p.bias);
  key.add(p.all_to_all_out != nullptr ? 1 : 0);
  // A prepared x2's layout decides whether the plan reads it (its buffer is bound per call).
  if (p.packed_x2 != nullptr && p.packed_x2->int_plan)
    key.add(1).add(*p.packed_x2);
  else
    key.add(0);
  return key;
}

}  // namespace

AlltoAllQuantMatmulPlanData plan_alltoall_quant_matmul_cached(AlltoAllQuantMatmulProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<AlltoAllQuantMatmulPlanData>(kAlltoAllQuantMatmulOp);
  const PlanKey key = plan_key(problem);
  return plan_cached(*cache, key, std::move(problem), [](const AlltoAllQuantMatmulProblem& p) {
    return plan_alltoall_quant_matmul(p);
  });
}

}  // namespace commfuse::ops
