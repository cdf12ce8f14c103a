// AlltoAllQuantMatmul (SPEC §3): the validated problem, the plan and the schedule.
//   validate.cpp        every rejection rule, on the calling rank, before any communication
//   plan.cpp              algorithm, combination, GEMM path, workspace layout
//   schedule_fused.cpp    all_to_all_stream; quantize while permuting; chunked int GEMM;
//                         epilogue
//   schedule_unfused.cpp  all_to_all, permute, quantize, int GEMM, dequant as separate
//                         passes: the reference
//   quant_gemm.cpp        the int GEMM + epilogue both schedules run
//   row_kernels.cpp       the row loops both schedules share
//   api.cpp             the public C++ entry points (C API: src/api/c_api_alltoall.cpp)
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/call_check.hpp"
#include "kernels/cpu/int_matmul.hpp"
#include "ops/common/op_context.hpp"
#include "ops/common/plan_cache.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

inline constexpr const char* kAlltoAllQuantMatmulOp = "alltoall_quant_matmul";

enum class QuantCombo { kA16W8, kA16W4, kA4W4 };
const char* combo_name(QuantCombo c);

struct AlltoAllQuantMatmulProblem {
  std::string group;
  int rank = 0;
  int world_size = 1;
  QuantCombo combo = QuantCombo::kA16W8;
  DType x1_dtype = DType::kFloat16;
  DType out_dtype = DType::kFloat16;
  int64_t bs = 0;  // x1 rows (per rank)
  int64_t h = 0;   // x1 columns
  int64_t n = 0;
  const void* x1 = nullptr;  // (BS, H) dense
  const void* x2 = nullptr;  // (R*H, N) or, transposed, (N, R*H); dense
  bool x2_transposed = false;
  // A16W8: x2 prepared ahead (options.packed_x2), bound per call; null: none.
  const PackedWeightImpl* packed_x2 = nullptr;
  const float* x2_scale = nullptr;     // (N,)
  const void* smooth = nullptr;        // A16: (R*H,) in x1's dtype, or null
  const float* token_scale = nullptr;  // A4W4: (BS,)
  BiasArg bias;
  void* output = nullptr;          // (BS/R, N) dense
  void* all_to_all_out = nullptr;  // (BS/R, R*H) in x1's dtype, or null

  Device device;  // where every tensor is (cuda: ops/cuda/device_plans.hpp runs the call)

  int64_t rows() const { return bs / world_size; }
  int64_t k() const { return h * world_size; }
};

// alltoAllAxesOptional: absent or [-2, -1] (shared with alltoall_matmul).
void check_alltoall_axes(const OpContext& ctx, const std::optional<std::vector<int64_t>>& axes);

// The call signature (ops/common/op_context.hpp), for the host and device plans alike.
template <typename Schedule>
comm::CallSignature alltoall_quant_matmul_signature(const char* op,
                                                    const AlltoAllQuantMatmulProblem& p,
                                                    Schedule schedule) {
  return call_signature(
      op,
      {{"BS (x1 rows)", p.bs},
       {"H (x1 columns)", p.h},
       {"N (x2 columns)", p.n},
       {"x1 dtype", static_cast<int64_t>(p.x1_dtype), true},
       {"quantization (0 A16W8, 1 A16W4, 2 A4W4)", static_cast<int64_t>(p.combo)}},
      schedule);
}

AlltoAllQuantMatmulProblem validate_alltoall_quant_matmul(
    const TensorView& x1, const TensorView& x2, const TensorView& x2_scale, std::string_view group,
    const TensorView& output, const TensorView& all_to_all_out,
    const AlltoAllQuantMatmulOptions& options);

// Pieces of the stream are at most kPieceRows token rows. The GEMM runs on chunks of
// gemm_chunk_rows() rows, collected from as many pieces as it takes.
inline constexpr int64_t kPieceRows = 256;
// The int32 sums one fused GEMM block leaves for its epilogue: 1 MiB, half an L2 of the
// CPUs met so far (the epilogue over 2048 rows of int32 sums read back from memory took
// 8.5 ms of a 70 ms call on the AMX Xeon), but blocks of at least kMinPackedCallRows
// (int_matmul.hpp: at N = 4096 the 1 MiB would be 64 rows, each block streaming all of x2).
inline constexpr int64_t kEpilogueBytes = int64_t{1} << 20;
inline constexpr int64_t kMinEpilogueRows = kernels::cpu::kMinPackedCallRows;
// COMMFUSE_ALLTOALL_GEMM_ROWS, or automatic: on shm the stream cannot run in the background
// of a GEMM (the rank that computes is the one that copies), and oneDNN's GEMM is fastest
// on all rows at once, so one GEMM after the last piece (measured: 256-row chunks made the
// op 10-40% slower at the README shape); other transports get chunks of off_shm_rows
// (alltoall_quant_matmul: 1024) so that assembly of the next chunk can overlap the GEMM of
// this one when the transport allows.
int64_t gemm_chunk_rows(comm::CommImpl& comm, int64_t rows, int64_t off_shm_rows = 1024);

// The algorithm list (core/algorithm.hpp), best first, the unfused composition last.
enum class AlltoAllQuantMatmulSchedule {
  kFused,    // all_to_all_stream; rows quantized where they arrive; chunked int GEMM
  kUnfused,  // all_to_all into the workspace, then permute, quantize, GEMM, dequant passes
};
const char* schedule_name(AlltoAllQuantMatmulSchedule s);

// Byte offsets into the workspace (each 64-byte aligned).
struct QuantWorkspace {
  size_t recv = 0;         // unfused: the all_to_all's receive buffer, R x rows x H of x1
  size_t recv_scales = 0;  // unfused A4W4: the received token scales, R x rows fp32
  size_t perm = 0;         // unfused without alltoAllOut: the permuted rows in x1's dtype
  size_t q = 0;            // rows x K int8: quantized permuted rows (A4W4: R segments of
                           // rows x H each, QuantGemm::q_segment)
  size_t scales = 0;       // A16: rows fp32; A4W4: rows x R fp32 (scale of segment s at i*R+s)
  size_t b = 0;            // x2 as the GEMM reads it (fp32 widened, int4 unpacked to int8,
                           // or packed: plan.b_packed)
  size_t b_unpacked = 0;   // int4 x2 packed or widened: unpacked to int8 first
  size_t acc = 0;          // int32 sums of a chunk (gemm_rows plus a piece; unfused: rows),
                           // or of one block (epilogue_rows)
  size_t yacc = 0;         // A4W4: the fp32 sum of the segments' products, as acc's rows
  size_t row = 0;          // K fp32: one permuted row being assembled
  size_t out_row = 0;      // N fp32
  size_t smooth = 0;       // K fp32 (A16 with smooth scale)
  size_t bias = 0;         // N fp32
  size_t total = 0;
};

struct AlltoAllQuantMatmulPlanData {
  comm::CallSignature signature;  // set by the API constructor (api.cpp)
  AlltoAllQuantMatmulProblem problem;
  AlltoAllQuantMatmulSchedule schedule = AlltoAllQuantMatmulSchedule::kFused;
  int a_max = 127;        // quantized activation bound: Q (A16) or 8 (int4 x1)
  int b_max = 127;        // weight bound: 127 (int8) or 8 (int4)
  int qmax = 127;         // Q of the dynamic quantization (A16)
  int64_t gemm_rows = 0;  // rows per GEMM chunk (unfused: all rows)
  // On oneDNN's s8 kernel, where packing pays (kernels/cpu/int_matmul.hpp:
  // int8_packing_pays): x2 packed once per execute into the kernel's blocked layout
  // (full_gemm's), which every GEMM of the call then reads. A4W4: segment by segment (the
  // H rows of x2 that multiply one source rank's part of a row), at b_segment_bytes apart.
  bool b_packed = false;
  // x2 read from problem.packed_x2 (prepared ahead in full_gemm's layout): nothing is
  // prepared per execute and the workspace holds no x2.
  bool b_prepacked = false;
  size_t b_segment_bytes = 0;  // A4W4 with x2 packed or widened; 0 otherwise
  // With b packed, the fused schedule runs each chunk's GEMM in blocks of epilogue_rows rows
  // and each block's epilogue right after it, while its int32 sums are in cache (about
  // kEpilogueBytes of them; a block costs no extra copy of x2). 0: each chunk's GEMM in one
  // call, then its epilogue (x2 not packed, and the unfused reference's separate passes).
  int64_t epilogue_rows = 0;
  // A16W8 of few rows where oneDNN's s8 kernel saturates (kernels/cpu/int_matmul.hpp:
  // direct_int8_kernel_pays): the direct int8 kernel on x2 in place, as A8W8's matmul ops
  // do. The other exact paths prepare all of x2 first (int16 pairs or fp32), which
  // for a decode step's few rows costs several times the product (BS 16, H 2048, N 4096,
  // W = 2 under the avx2 cap: 32 ms on avx2-madd16, 49 on f32-blocked, 22 for the bf16
  // path). Nothing is prepared, packed_x2 is not read.
  bool small_m = false;
  kernels::cpu::IntMatmulPath path = kernels::cpu::IntMatmulPath::kS8;
  std::shared_ptr<const kernels::cpu::IntMatmulPlan> full_gemm;  // for prepare_b
  QuantWorkspace ws;
};

AlltoAllQuantMatmulPlanData plan_alltoall_quant_matmul(AlltoAllQuantMatmulProblem problem);
// The same, from the plan cache when a call with the same descriptor was planned before
// (ops/common/plan_cache.hpp): what the API's plan constructor calls.
AlltoAllQuantMatmulPlanData plan_alltoall_quant_matmul_cached(AlltoAllQuantMatmulProblem problem);
// One line: op, combination, shape, algorithm, GEMM chunking, workspace and the int GEMM's
// path.
std::string describe(const AlltoAllQuantMatmulPlanData& plan);

// The int GEMM of m permuted rows over kk of the k = R·H columns (kk = K, or A4W4's
// segment of H: its activations are dense rows x H per segment), with the plan's value
// bounds and path: what planning and both schedules multiply.
kernels::cpu::IntMatmulDesc int_gemm_desc(const AlltoAllQuantMatmulPlanData& plan, int64_t m,
                                          int64_t kk);

void run_alltoall_quant_matmul_fused(const AlltoAllQuantMatmulPlanData& plan, comm::CommImpl& comm,
                                     void* workspace);
void run_alltoall_quant_matmul_unfused(const AlltoAllQuantMatmulPlanData& plan,
                                       comm::CommImpl& comm, void* workspace);

}  // namespace commfuse::ops
