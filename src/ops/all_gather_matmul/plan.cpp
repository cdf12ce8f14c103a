// all_gather_matmul planning: the schedule, the block GEMM and its workspace.
#include "ops/all_gather_matmul/plan.hpp"

#include <algorithm>
#include <vector>

#include "comm/comm_impl.hpp"
#include "comm/transport.hpp"
#include "core/algorithm.hpp"
#include "kernels/cpu/half_gemm_model.hpp"

namespace commfuse::ops {

const char* schedule_name(AllGatherMatmulSchedule s) {
  switch (s) {
    case AllGatherMatmulSchedule::kFused:
      return "fused";
    case AllGatherMatmulSchedule::kUnfused:
      return "unfused";
  }
  return "?";
}

namespace {

size_t align64(size_t v) {
  return (v + 63) / 64 * 64;
}

// SPEC §6: the schedule is chosen as for the float op; the block product is quantized.
AllGatherMatmulPlanData plan_quantized(AllGatherMatmulPlanData plan) {
  const AllGatherMatmulProblem& p = plan.problem;
  const int64_t rows = p.m * p.world_size;
  const bool unfused = plan.schedule == AllGatherMatmulSchedule::kUnfused;
  QuantGemmShape& g = plan.qgemm;
  g.q = p.quant;
  g.k = p.k;
  g.n = p.n;
  g.b = p.x2;
  g.bias = p.bias;
  g.c_dtype = p.out_dtype;
  // As for float rows (plan.hpp, kCachedX2Bytes): when x2 does not stay in cache (its fp32
  // size, what the int GEMM without VNNI streams), or blocks are tiny, every product call
  // streams it, so the fused schedule stages the arriving codes (in gather_out, or the
  // workspace) and runs one product over all rows; otherwise each block is multiplied as it
  // arrives, overlapping the next block's transfer.
  const bool x2_cached = p.k * p.n <= kCachedX2Bytes / 4;
  const bool one_run = unfused || !x2_cached || p.m < kMinBlockRows;
  g.max_rows = std::max<int64_t>(1, one_run ? rows : p.m);
  plan_quant_gemm(g);
  plan.gemm_rows = one_run ? rows : 1;
  plan.stage_in_gather_out = !unfused && one_run && p.gather_out != nullptr;
  plan.scales_offset = align64(quant_gemm_workspace_bytes(g));
  plan.gathered_scales_offset = align64(plan.scales_offset + static_cast<size_t>(p.m) * 4);
  plan.workspace_bytes = plan.gathered_scales_offset + static_cast<size_t>(rows) * 4;
  if (one_run && p.gather_out == nullptr) {  // the gathered codes: the one run reads them
    plan.staging_offset = align64(plan.workspace_bytes);
    plan.workspace_bytes =
        plan.staging_offset + dtype_storage_bytes(p.dtype, static_cast<size_t>(rows * p.k));
  }
  return plan;
}

// Blocks of so few rows that the direct kernel multiplies them (kernels/cpu/half_gemm_model:
// faster than oneDNN's native call, whose fixed cost R calls would pay R times), with a
// core per rank: then each block on arrival costs little more than its share of one GEMM,
// and this rank's block is multiplied while the peers' are still in flight. Measured on the
// AMX Xeon with the 8-lane direct kernel and its 1-row blocks only, 1 row per rank, k = n =
// 256 bf16, W = 2: 6.3-6.6 us on arrival against 6.9-7.0 staged and 6.8-7.0 unfused (a
// native 2-row call). Not with more ranks than cores (W = 3 and 4 on 2 cores: 19
// and 25 us against 15 and 16 unfused: a rank computing holds the core a peer needs).
// Only where R calls of m rows are expected faster than one call of the R·m gathered rows
// (half_gemm_model.hpp: direct_calls_pay): with the 16-lane direct kernel the AMX Xeon
// runs one 2-row call in 3.3 us against 2 x 2.1 us, and on arrival then lost (1 row per
// rank, k = n = 256, W = 2: 5.3-5.4 us against 4.3-4.4 unfused; 2 rows per rank, on arrival
// against the native 4-row call: 8.3-8.4 against 7.6-7.7). By rank 0's few-rows model,
// which the transport holds for the group (measured at set-up, only with a core per rank):
// the algorithm list reads this (stages_every_row), so every rank must decide alike, and
// each process's own timing does not (two runs on the AMX Xeon measured the direct kernel
// faster up to 1 and up to 2 rows).
bool direct_blocks(const AllGatherMatmulProblem& p, const comm::Transport& t) {
  static_assert(kMinBlockRows - 1 <= kernels::cpu::kDirectCallsRows);
  return p.m >= 1 && p.m < kMinBlockRows && t.direct_calls_pay(p.dtype, p.m);
}

// x2's element count is an int64 (validated); its size as fp32 may not be.
bool x2_stays_cached(const AllGatherMatmulProblem& p) {
  return p.k * p.n <= kCachedX2Bytes / 4;
}

// Whether the fused schedule multiplies each arriving block on its own: x2 stays in cache
// and blocks are big enough for a GEMM each (or `direct`: direct_blocks for blocks under
// kMinBlockRows).
bool on_arrival(const AllGatherMatmulProblem& p, bool direct) {
  return x2_stays_cached(p) && (p.m >= kMinBlockRows || direct);
}

// The fused schedule's GEMM size (float rows): 1 = each arriving block on its own
// (on_arrival); otherwise the arriving rows are staged and multiplied in GEMMs of up to this
// many rows.
int64_t fused_gemm_rows(const AllGatherMatmulProblem& p, bool direct) {
  if (on_arrival(p, direct)) return 1;
  return std::max<int64_t>(1, std::min(p.m * p.world_size, kMaxGemmRows));
}

// Whether fused_gemm_rows stages every row for one GEMM after the last block (`direct`:
// direct_blocks, which every rank decides alike, as an algorithm choice must be).
bool stages_every_row(const AllGatherMatmulProblem& p, bool direct) {
  return p.world_size >= 2 && p.m * p.world_size <= kMaxGemmRows && !on_arrival(p, direct);
}

}  // namespace

AllGatherMatmulPlanData plan_all_gather_matmul(AllGatherMatmulProblem problem) {
  AllGatherMatmulPlanData plan;
  plan.problem = std::move(problem);
  const AllGatherMatmulProblem& p = plan.problem;
  // Four or more ranks per core (one host): a rank that multiplies a small block on arrival
  // holds a core its peers need to publish theirs, while the unfused all_gather lets every
  // rank publish before any computes. Measured on 2 cores (AMD EPYC, best of 20 x 100 calls):
  // the demo's seed example (16 x 512 x 64 fp16 blocks) at W = 8 ran fused 920 us, unfused
  // 751 us; at W = 4 (32-row blocks) fused 387 us, unfused 428 us; the 64 x 1024 x 256 bf16
  // blocks at W = 8 fused 16.1 ms, unfused 17.2 ms. A property of the scheduling, not the ISA.
  AlgorithmEntry fused{"fused", ""};
  const comm::Transport& transport = find_comm(p.group).impl().transport();
  const int per_core = transport.ranks_per_core();
  // One rank: no block arrives from anywhere, so nothing overlaps, and the stream's fixed
  // costs per call remain. AMD EPYC Zen 4, W = 1 on shm, 1 row × 256 × 256 bf16: fused
  // 4.5 us against the composition's 4.2-4.3 (3 runs); by callgrind 2.6 k instructions a
  // call besides the GEMM against the all_gather's 1.1 k.
  if (p.world_size == 1) fused.not_preferred = "one rank: nothing arrives to overlap with the GEMM";
  // m·k·n < limit, as m·k <= (limit - 1) / n: m·k is x1's element count (an int64), the
  // product with n may not be.
  if (per_core >= kCrowdedRanksPerCore && p.m * p.k <= (kCrowdedMinBlockMacs - 1) / p.n)
    fused.not_preferred = detail::cat(per_core, " ranks per core and blocks under ",
                                      kCrowdedMinBlockMacs, " multiply-adds");
  // Over MPI, x1's block within one round of the all_gather (its descriptor messages): the
  // stream takes two, more than its overlap can hide. W = 2 over TCP, bf16 (AMX Xeon, polled
  // inline): 1 row × 256 × 256 fused 17.6 us, unfused 11.0; 8 rows × 1024 × 256 61.5 / 39.8.
  // (shm has no such round: one_round_bytes 0, which an empty x1 must not match.)
  const uint64_t one_round = transport.one_round_bytes();
  const uint64_t block_bytes = dtype_storage_bytes(p.dtype, static_cast<size_t>(p.m * p.k));
  if (fused.not_preferred.empty() && p.world_size > 1 && one_round > 0 && block_bytes <= one_round)
    fused.not_preferred =
        detail::cat("x1's block of ", block_bytes, " bytes goes with the ", transport.name(),
                    " all_gather's descriptors (one round of messages; the stream takes two)");
  // Staged rows multiplied in one GEMM after the last block arrived: the fused schedule
  // then does the unfused composition's work with nothing to overlap, through a stream whose
  // fixed costs per call the all_gather does not pay. W = 2 on shm, AMX Xeon, op fused / op
  // unfused (forced): level within the runs' spread where the rule applies (fp32 1 row ×
  // 256 × 256 3.9-4.0 / 3.9 us; bf16 2-8 KiB blocks, 2 × 512 × 256 to 1 × 4096 × 256; the
  // decode 8 × 4096 × 4096 and prefill 1024 × 4096 × 4096 shapes; bf16 1 × 256 × 256
  // where the direct kernel's two calls do not pay, 5.0 / 4.7 us).
  const int64_t rows = p.m * p.world_size;
  const bool direct = direct_blocks(p, transport);
  if (fused.not_preferred.empty() && !p.quant.quantized() && stages_every_row(p, direct))
    fused.not_preferred = detail::cat("it would stage all ", rows,
                                      " rows and multiply them in one GEMM after the last block "
                                      "arrives: nothing to overlap");
  // Where the rank's own core moves the bytes (shm: a peer's block is read by the core that
  // then multiplies it) nothing overlaps; what fused can save is memory traffic: without
  // gather_out it multiplies each peer's block from a small piece that stays in cache (or its
  // slot), where the unfused all_gather lands all m·R rows in the workspace and the GEMM reads
  // them back. With gather_out every row lands there anyway, and small blocks cost R GEMM
  // calls (and a per-call pack of x2) where one would do. Forced fused / forced unfused on
  // shm, AMD EPYC Zen 4, W = 2 (x_unfused, below 1 fused is slower): with gather_out, 8-16
  // rows per rank 0.79-0.90 (bf16, fp32; k = 512 or 1024, n = 64 or 256), 32-2048 rows
  // 0.94-1.03, W = 4 0.77-0.90 at 8-16 rows; without, 8-16 rows 0.79-1.02, 32 rows
  // 0.98-1.02, 64-1024 rows 0.96-1.13 (8 of 9 faster). The quantized op (A8W8, k = 1024,
  // n = 256) gains nothing either way: with gather_out 0.84-0.88 at 8-16 rows, 0.97 at 64-256;
  // without, 0.85 at 16 rows, 0.93-1.09 at 64-256. Not the direct kernel's few-row blocks
  // (direct_blocks: measured to pay); over MPI bytes move while this rank computes (4096 x
  // 4096 x 64 bf16 over TCP: fused 0.79x the unfused time).
  if (fused.not_preferred.empty() && p.world_size > 1 && !direct && !transport.overlaps_compute()) {
    if (p.gather_out != nullptr)
      fused.not_preferred = detail::cat(
          "on ", transport.name(),
          " the core that copies a peer's block also multiplies it, and with gather_out every "
          "row is copied anyway: nothing to save");
    else if (p.quant.quantized())
      fused.not_preferred = detail::cat(
          "on ", transport.name(),
          " the core that copies a peer's codes also multiplies them: nothing overlaps");
    else if (p.m < kShmMinArrivalRows)
      fused.not_preferred =
          detail::cat("on ", transport.name(), ", blocks of ", p.m, " rows: ", p.world_size,
                      " GEMM calls cost more than one of ", rows, " (fused pays from ",
                      kShmMinArrivalRows, " rows)");
  }
  const std::vector<AlgorithmEntry> list{fused, {"unfused", ""}};
  plan.schedule = static_cast<AllGatherMatmulSchedule>(choose_algorithm(
      kAllGatherMatmulOp,
      [&] {
        return detail::cat(kAllGatherMatmulOp, "(rank ", p.rank, ") m=", p.m,
                           "/rank R=", p.world_size, " k=", p.k, " n=", p.n, " ",
                           dtype_name(p.dtype));
      },
      list));
  if (p.quant.quantized()) return plan_quantized(std::move(plan));
  plan.gemm.dtype = p.dtype;
  plan.gemm.k = p.k;
  plan.gemm.n = p.n;
  plan.gemm.b = p.x2;
  plan.gemm.bias = p.bias;
  plan.gemm.c_dtype = p.dtype;
  plan.gemm_rows =
      plan.schedule == AllGatherMatmulSchedule::kUnfused ? rows : fused_gemm_rows(p, direct);
  // Staged (or unfused): few GEMMs of up to gemm_rows rows, so few rows may take the direct
  // small-m kernel on the 16-bit x2 in place. Multiplied on arrival: R GEMMs over the same
  // x2, which is then widened once per execute rather than once per block (max_rows 0).
  const bool on_arrival = plan.gemm_rows == 1 && plan.schedule == AllGatherMatmulSchedule::kFused;
  // 1-row blocks for the direct kernel: planned as such (not as many rows, which the model
  // might widen).
  plan.gemm.max_rows = !on_arrival         ? std::max<int64_t>(1, plan.gemm_rows)
                       : direct            ? p.m
                       : p.world_size == 1 ? std::max<int64_t>(1, p.m)
                                           : 0;
  plan.gemm.block_rows = on_arrival ? p.m : 0;
  plan_row_gemm(plan.gemm);
  // The widened x2 and bias when oneDNN needs fp32 (or x2 packed for the native kernel);
  // then, for the fused schedule, the
  // staging area unless rows are multiplied where they arrive or staged in gather_out (no
  // gathered copy of x1 is needed even without gather_output).
  plan.workspace_bytes = row_gemm_workspace_bytes(plan.gemm);
  if (plan.schedule == AllGatherMatmulSchedule::kUnfused) {
    plan.staging_offset = (plan.workspace_bytes + 63) / 64 * 64;
    if (p.gather_out == nullptr)
      plan.workspace_bytes =
          plan.staging_offset + dtype_storage_bytes(p.dtype, static_cast<size_t>(rows * p.k));
    return plan;
  }
  plan.stage_in_gather_out =
      !on_arrival && !plan.gemm.widen && p.gather_out != nullptr && plan.gemm_rows >= rows;
  if (plan.stage_in_gather_out) return plan;
  plan.staging_offset = (plan.workspace_bytes + 63) / 64 * 64;
  plan.staged_out_offset =
      (plan.staging_offset + RowGemm::staging_bytes(plan.gemm, plan.gemm_rows) + 63) / 64 * 64;
  plan.workspace_bytes = plan.staged_out_offset +
                         dtype_storage_bytes(p.dtype, static_cast<size_t>(plan.gemm_rows * p.n));
  return plan;
}

namespace {

PlanKey plan_key(const AllGatherMatmulProblem& p) {
  PlanKey key(kAllGatherMatmulOp, p.group);
  key.add(p.rank).add(p.world_size).add(static_cast<int64_t>(p.dtype));
  key.add(static_cast<int64_t>(p.out_dtype)).add(p.m).add(p.k).add(p.n);
  key.add(p.x2).add(p.bias).add(p.quant).add(p.comm_turn);
  // The schedule stages rows in gather_out when there is one.
  key.add(p.gather_out != nullptr ? 1 : 0);
  return key;
}

// The call's pointers in the shapes planning copied them into (plan_all_gather_matmul,
// plan_quantized); the problem's own come with it.
void bind_pointers(AllGatherMatmulPlanData& plan) {
  const AllGatherMatmulProblem& p = plan.problem;
  if (p.quant.quantized()) {
    plan.qgemm.q = p.quant;
    plan.qgemm.b = p.x2;
    plan.qgemm.bias = p.bias;
  } else {
    plan.gemm.b = p.x2;
    plan.gemm.bias = p.bias;
  }
}

}  // namespace

AllGatherMatmulPlanData plan_all_gather_matmul_cached(AllGatherMatmulProblem problem) {
  // Never destroyed: a plan may be made while static objects are being torn down.
  static auto* const cache = new PlanCache<AllGatherMatmulPlanData>(kAllGatherMatmulOp);
  return cache->get(
      plan_key(problem), [&] { return plan_all_gather_matmul(problem); },
      [&](AllGatherMatmulPlanData& plan) {
        plan.problem = std::move(problem);
        bind_pointers(plan);
      });
}

std::string describe(const AllGatherMatmulPlanData& plan) {
  const AllGatherMatmulProblem& p = plan.problem;
  const int64_t rows = p.m * p.world_size;
  // gemm_rows 1: the fused schedule multiplies each piece of a block where it arrives
  // (fused_gemm_rows), of up to stream_piece_rows rows.
  const bool on_arrival = plan.gemm_rows == 1 && plan.schedule == AllGatherMatmulSchedule::kFused;
  const int64_t piece_rows = stream_piece_rows(p);
  if (p.quant.quantized())
    return detail::cat(kAllGatherMatmulOp, "(rank ", p.rank, "): m=", p.m,
                       "/rank x R=", p.world_size, " k=", p.k, " n=", p.n, " ", dtype_name(p.dtype),
                       " x ", dtype_name(p.quant.b_dtype), ", schedule ",
                       schedule_name(plan.schedule),
                       on_arrival ? ", each block on arrival" : ", one product at the end",
                       plan.stage_in_gather_out ? " (staged in gather_out)" : "", ", workspace ",
                       plan.workspace_bytes, " bytes; gemm: ", describe_quant_gemm(plan.qgemm));
  return detail::cat(
      kAllGatherMatmulOp, "(rank ", p.rank, "): m=", p.m, "/rank x R=", p.world_size, " k=", p.k,
      " n=", p.n, " ", dtype_name(p.dtype), ", schedule ", schedule_name(plan.schedule),
      on_arrival ? detail::cat(", pieces of up to ", piece_rows, " rows multiplied on arrival")
                 : detail::cat(", GEMMs of up to ", plan.gemm_rows, " rows"),
      plan.stage_in_gather_out ? " (staged in gather_out)" : "", ", workspace ",
      plan.workspace_bytes, " bytes; gemm: ",
      describe_row_gemm(plan.gemm, on_arrival ? piece_rows : std::min(rows, plan.gemm_rows)));
}

}  // namespace commfuse::ops
