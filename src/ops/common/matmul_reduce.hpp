// What MatmulReduceScatter and MatmulAllReduce share: both multiply the local x1 by the
// local x2 into an fp32 partial product, sum the partials across ranks in rank order, then
// add the bias once and round once (SPEC §0, §2).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm_impl.hpp"
#include "core/small_vector.hpp"
#include "ops/common/plan_cache.hpp"
#include "ops/common/quant_operands.hpp"
#include "ops/common/quant_row_gemm.hpp"
#include "ops/common/row_gemm.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

struct MatmulReduceProblem {
  std::string group;
  int rank = 0;
  int world_size = 1;
  DType dtype = DType::kFloat32;      // x1 (and x2 outside quantized mode)
  DType out_dtype = DType::kFloat32;  // output: dtype, or bf16/fp16/fp32 when quantized
  int64_t m = 0;                      // rows of x1 (leading dims flattened)
  int64_t k = 0;
  int64_t n = 0;
  const void* x1 = nullptr;  // (m, k) dense
  WeightLayout x2;
  BiasArg bias;
  QuantScales quant;       // SPEC §6 (mode kNone: the §2 op)
  void* output = nullptr;  // dense
  int64_t comm_turn = 0;
  Device device;  // where every tensor is (cuda: ops/cuda/device_plans.hpp runs the call)
};

// The operand rules both ops share: reduce_op, comm_turn, x1 (2-D, or 3-D when
// allow_3d), x2, the SPEC §6 scales, bias. Fills everything but output and out_dtype.
MatmulReduceProblem validate_matmul_operands(const OpContext& ctx, const TensorView& x1,
                                             const TensorView& x2,
                                             const MatmulReduceOptions& options, bool allow_3d);

// The bias, added once, must hold the same values on every rank — else the rows would get
// one rank's bias or another's depending on the schedule, and the ranks' results would
// differ (SPEC §2: bitwise identical on all ranks). So the signature every rank compares
// gets a bias field: 0 when absent (fixed at plan time), else a digest of the values, which
// may change between calls of one plan: add_bias_field returns its index for execute to set
// (call_field_value; plan_impl.hpp), -1 when absent. A device bias (digest: false) is
// compared as present or not: its values are in device memory.
int add_bias_field(const MatmulReduceProblem& p, comm::CallSignature& s, bool digest = true);
int64_t call_field_value(const MatmulReduceProblem& p);

// The output apart from every input (tensor_checks.hpp check_disjoint).
void check_matmul_reduce_disjoint(const OpContext& ctx, const TensorView& x1, const TensorView& x2,
                                  const TensorView& output, const MatmulReduceOptions& options);

// Every tensor of a reducing op's call on one device (tensor_checks.hpp check_devices).
Device check_matmul_reduce_devices(const OpContext& ctx, const TensorView& x1, const TensorView& x2,
                                   const TensorView& output, const MatmulReduceOptions& options);

// "<op>(rank r) m=.. R=.. k=.. n=.. <dtype>": the problem, as decision lines and plan
// descriptions name it.
std::string describe_problem(const char* op, const MatmulReduceProblem& p);
// One line for a plan description (both ops): the problem, schedule, workspace and GEMM.
struct PartialShape;
std::string describe_matmul_reduce_plan(const char* op, const MatmulReduceProblem& p,
                                        const char* schedule, size_t workspace_bytes,
                                        const PartialShape& gemm);

// Where nothing overlaps the GEMM (Transport::overlaps_compute: shm, whose ranks copy and
// multiply on the same cores), a fused schedule gains only the passes over the fp32 partial
// that it saves and pays fixed per-call costs the collective does not (the stream's pieces
// and callbacks). Below these partial sizes (m·n·4 bytes per rank) the lists prefer the
// unfused composition; docs/algorithms.md "Small partials on shm" gives the forced runs on
// the AMX Xeon that set them (fused / unfused above 1 below them, under 1 above). Over MPI
// the fused schedules stay first unless a rank's block fits one round of the collective
// ("Small blocks over MPI"). matmul_all_reduce's one-pass `fused`, taken where R does not
// divide m, borrows its two-phase schedule's threshold unmeasured.
inline constexpr int64_t kReduceScatterFusedMinPartialBytes = 64 << 10;
inline constexpr int64_t kAllReduceFusedMinPartialBytes = 16 << 10;
static_assert(kReduceScatterFusedMinPartialBytes % 4 == 0 &&
                  kAllReduceFusedMinPartialBytes % 4 == 0,
              "small_partial_reason compares whole fp32 elements");

// What the unfused composition's collective sends each peer: a rank's block of the partial
// (reduce_scatter) or the whole partial (all_reduce, one-shot).
enum class UnfusedSends { kBlock, kWhole };
// Why the fused schedules are not preferred for p (on its group's transport) with the
// threshold above (min_bytes), or "" where they are. Over a transport that overlaps: where
// what the unfused collective sends each peer fits one round (Transport::one_round_bytes).
std::string small_partial_reason(const MatmulReduceProblem& p, int64_t min_bytes,
                                 UnfusedSends sends);

// Row blocks of the local partial product x1 @ x2 in fp32, no bias (it is added once,
// after the sum): the float GEMM, or in quantized mode (SPEC §6) the quantized product
// dequantized, f32(acc) * (x1_scale[i] * x2_scale[j]), in fp32.
struct PartialShape {
  RowGemmShape gemm;
  QuantGemmShape qgemm;
  bool quantized = false;
};
// Planned (both ops' plan step).
PartialShape partial_product_shape(const MatmulReduceProblem& p);

// The plan cache's descriptor of a validated problem (plan_cache.hpp), and the call's
// pointers in a cached partial-product shape (what partial_product_shape copies from p).
PlanKey plan_key(const char* op, const MatmulReduceProblem& p);
void bind_pointers(PartialShape& s, const MatmulReduceProblem& p);

class PartialGemm {
 public:
  // Prepares x2 into the workspace's start (as RowGemm / QuantRowGemm do).
  PartialGemm(const PartialShape& s, const MatmulReduceProblem& p, void* workspace);
  // c (rows x n fp32, dense) = x1's rows [first, first + rows) @ x2, dequantized.
  void run(int64_t first, int64_t rows, float* c) const;
  const PartialShape& shape() const { return shape_; }

 private:
  const PartialShape& shape_;  // the plan's (outlives the execute)
  std::optional<RowGemm> float_;
  std::optional<QuantRowGemm> quant_;
  const uint8_t* x1_;
  size_t x1_row_bytes_;
  RowScales scales_;
};

// The fused schedules' workspace: the block GEMM's, the bias as n fp32 values, then the
// fp32 partial product (m, n).
size_t matmul_reduce_workspace_bytes(const MatmulReduceProblem& p);
// Where that bias starts in the workspace (filled by widen_bias at execute), after the
// planned partial GEMM's own part (s: the plan's, so that execute does not plan again).
float* matmul_reduce_bias32(const PartialShape& s, void* workspace);
// Where the partial product starts.
float* matmul_reduce_partial(const PartialShape& s, const MatmulReduceProblem& p, void* workspace);

// The partial product x1 @ x2 computed on demand in blocks of rows: a piece's rows
// are ready once their block is computed. One GEMM per block rather than per piece, because
// each GEMM call streams (and repacks) all of x2: 64-row pieces measured 1.5x slower than
// the unfused schedule's single GEMM. Later blocks' GEMMs still overlap the transfer of
// earlier pieces on MPI. Rows are grouped in `ranges` of range_rows rows (matmul_reduce_
// scatter: one range per destination rank, computed in the order the stream asks for them).
class LazyPartial {
 public:
  // Rows per GEMM call: large when x2 (fp32) does not stay in cache (each call streams it),
  // small when it does (more overlap with the transfer on MPI).
  static constexpr int64_t kBlockRowsStreamed = 2048;
  static constexpr int64_t kBlockRowsCached = 256;
  static constexpr int64_t kCachedX2Bytes = 2 << 20;

  // split: compute in blocks as the stream asks (the transport overlaps the transfer of one
  // block with the GEMM of the next); otherwise all ranges in one GEMM at the first request
  // (each call streams and repacks x2: two 1024-row GEMMs measured ~40 ms slower than one
  // 2048-row GEMM at k = n = 4096 bf16 on shm, where nothing overlaps them).
  LazyPartial(const PartialGemm& gemm, const MatmulReduceProblem& p, float* partial, int ranges,
              int64_t range_rows, bool split);
  // Rows [row, row + rows) of range r, computed if they were not yet.
  const float* rows(int r, int64_t row, int64_t rows);

 private:
  const PartialGemm& gemm_;
  int64_t n_;
  float* partial_;
  int64_t range_rows_;
  int64_t block_rows_;
  int ranges_;
  SmallVector<int64_t, 16> done_;  // per range: rows computed so far (a prefix)
  bool split_;
};

// Pieces of the fp32 partials: one shm slot at most, and at most 1 MiB so a piece's R parts
// are still in cache when they are summed (the all_reduce measurement, docs/algorithms.md);
// comm_turn c > 0: at most ceil(rows/c) rows (SPEC §2; the transport may cut pieces smaller).
uint64_t matmul_reduce_piece_bytes(const MatmulReduceProblem& p, int64_t rows);

// The reduce-scatter of the partial products, fused (matmul_reduce_scatter's schedule, and
// phase one of matmul_all_reduce's two-phase one): an all_to_all_stream of fp32 partial
// rows computed on demand (peers' rows first, own last), and this rank's m/R rows summed in
// rank order from the peers' slots in place, the bias added once, rounded once into out_rows
// ((m/R) x n, p.dtype). Needs m % R == 0.
void reduce_scatter_partials(const MatmulReduceProblem& p, const PartialGemm& gemm,
                             comm::CommImpl& comm, void* workspace, void* out_rows);

}  // namespace commfuse::ops
