// What QuantAllReduce and QuantReduceScatter share (SPEC §4): the operand rules, the wire
// row (a token row's H codes followed by its scales, so one row travels as one unit), and
// the fused step that dequantizes the ranks' rows in rank order into one fp32 accumulator
// and rounds it once to the output dtype.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "comm/transport.hpp"
#include "kernels/cpu/dequant.hpp"
#include "ops/common/op_context.hpp"
#include "ops/common/plan_cache.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

struct QuantReduceProblem {
  std::string group;
  int rank = 0;
  int world_size = 1;
  std::string transport;  // the group's ("shm", "mpi"): schedules depend on it
  DType x_dtype = DType::kInt8;
  kernels::cpu::ScaleKind kind = kernels::cpu::ScaleKind::kGroup128;
  int64_t rows = 0;  // BS: x's leading dims flattened
  int64_t h = 0;
  const uint8_t* x = nullptr;       // (rows, h) codes
  const uint8_t* scales = nullptr;  // rows × scale_row_bytes
  DType out_dtype = DType::kFloat32;
  void* output = nullptr;
  // Threads that split a piece's rows (kernels::cpu::compute_threads(): more than one only
  // when this rank has cores to itself, e.g. one rank per host).
  int threads = 1;
  Device device;  // where every tensor is (cuda: ops/cuda/device_plans.hpp runs the call)

  int64_t scale_bytes() const { return kernels::cpu::scale_row_bytes(kind, h); }
  // Bytes of one row on the wire: codes, then scales.
  int64_t unit() const { return h + scale_bytes(); }
};

// "<op>(rank r) rows=.. h=.. <x dtype> -> <out dtype> R=.. on <transport>": the problem, as
// decision lines and plan descriptions name it.
std::string describe_problem(const char* op, const QuantReduceProblem& p);

// The plan cache's descriptor of a validated problem (ops/common/plan_cache.hpp).
PlanKey plan_key(const char* op, const QuantReduceProblem& p);

// Both quantized reductions' call signature (ops/common/op_context.hpp).
template <typename Schedule>
comm::CallSignature quant_reduce_signature(const char* op, const QuantReduceProblem& p,
                                           Schedule schedule) {
  return call_signature(op,
                        {{"BS (x rows)", p.rows},
                         {"H (x columns)", p.h},
                         {"x dtype", static_cast<int64_t>(p.x_dtype), true},
                         {"scales (0 per-group float32, 1 MX e8m0)", static_cast<int64_t>(p.kind)},
                         // Alike on every rank: it decides quant_all_reduce's algorithm
                         // off shm, and its bytes travel in the two-phase schedule.
                         {"output dtype", static_cast<int64_t>(p.out_dtype), true}},
                        schedule);
}

// reduce_op, x (2-D or 3-D, an 8-bit format, H % group == 0, no empty dims) and scales
// (float32 → K-G, float8_e8m0 → MX, shape from x). Fills everything but the output.
QuantReduceProblem validate_quant_operands(const OpContext& ctx, const TensorView& x,
                                           const TensorView& scales, std::string_view reduce_op);
// output: present, float32 / float16 / bfloat16, contiguous (the shape is the op's rule).
void check_quant_output(const OpContext& ctx, const TensorView& output);

// Copies rows [row0, row0 + n_rows) of x and their scales into dst as wire rows.
void pack_rows(const QuantReduceProblem& p, int64_t row0, int64_t n_rows, uint8_t* dst);

// out rows [0, n_rows) (dense, p.out_dtype, h columns) = Σ_r dequant(parts[r] rows) in rank
// order r = 0..R-1, one rounding. Rows are split over p.threads threads (each row is summed
// by one thread in the same order, so the bits do not depend on it).

// Where the sums accumulate, as the op's plan decided: acc, p.threads × h floats of scratch
// (acc_bytes; unused by float32 output summed in place); stream: float32 output is summed in
// acc rows and written with non-temporal stores instead (stream_output).
struct SumScratch {
  float* acc = nullptr;
  bool stream = false;
};

void sum_rows(const QuantReduceProblem& p, const uint8_t* const* parts, int64_t n_rows, void* out,
              SumScratch scratch);
// The same sum over codes and scales held apart: rank r's row i has its codes at codes[r] +
// i·h and its scales at scales[r] + i·scale_bytes() (fused_scales_first).
void sum_rows_apart(const QuantReduceProblem& p, const uint8_t* const* codes,
                    const uint8_t* const* scales, int64_t n_rows, void* out, SumScratch scratch);

// Rank r's block of the sum: rows [r·rows/R, (r+1)·rows/R) (rows % R == 0), through an
// all-to-all stream whose unit is one wire row: pack(to) copies this rank's rows of block
// `to`, on_all sums every rank's rows of this rank's block in place, in rank order, into
// out (rows/R dense rows of p.out_dtype).
void reduce_own_block(const QuantReduceProblem& p, comm::Transport& transport, void* out,
                      SumScratch scratch);

// Whether an op that writes out_elements float32 elements per call should stream them
// (SumScratch::stream, a plan's decision): at least kernels::cpu::nontemporal_copy_bytes(),
// the size from which the transports' copies stream too.
bool stream_output(const QuantReduceProblem& p, int64_t out_elements);

// Scratch bytes sum_rows needs (0 for float32 output summed in place, stream false).
size_t acc_bytes(const QuantReduceProblem& p, bool stream);

// The unfused references' first pass: every row of this rank's x dequantized to fp32 (code x
// scale, one multiply, as the fused schedules' first rank), dense, into dst (rows x h).
void dequantize_rows(const QuantReduceProblem& p, float* dst);

// max_piece for the streams: 0, the transport's largest piece (a whole slot on shm, 1 MiB
// on MPI). Each piece is one synchronization of all ranks; with more runnable
// processes than cores (2+ ranks on this 2-core VM, next to other jobs) each one can cost a
// scheduler time slice. Measured: pieces sized for L2 (512 KiB for the R parts) were 2-5x
// slower than whole-slot pieces at 1-4 Mi elements, W = 2; the data is streamed once either
// way, so nothing is lost by missing L2.
uint64_t quant_piece_bytes(const QuantReduceProblem& p, const comm::Transport& transport);

}  // namespace commfuse::ops
