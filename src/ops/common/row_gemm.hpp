// Row blocks of one product a @ b, multiplied as they become available: a peer's rows read
// in place from its shm slot, one piece of a stream at a time. b and the bias are prepared
// once per execute, never per block: where oneDNN has no native kernel for the dtype (fp16
// always; bf16 without AVX512-BF16) they are widened to fp32 once into the workspace, and
// each block's rows are widened in the same pass that copies them (to gather_out) anyway.
// The result is the same as one big GEMM up to oneDNN's fp32 summation order: fp32
// accumulation, bias in fp32, one RNE rounding to c's dtype (SPEC §0).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_b.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

struct RowGemmShape {
  DType dtype = DType::kFloat32;  // a and b
  int64_t k = 0;
  int64_t n = 0;
  WeightLayout b;
  BiasArg bias;                     // absent: no bias
  DType c_dtype = DType::kFloat32;  // dtype or float32
  // The most rows any one GEMM of this execute multiplies (0: unknown, many): few rows of
  // fp16/bf16 without a native kernel run the direct small-m kernel on the 16-bit b in
  // place, so nothing is widened into the workspace.
  int64_t max_rows = 0;
  // With max_rows 0: the rows a block usually has (0: unknown), so that the GEMM plan the
  // blocks will run decides whether x2 is packed for them.
  int64_t block_rows = 0;
  // Set by plan_row_gemm at plan time, so that an execute looks nothing up: whether b is
  // widened, and the GEMM plan of a max_rows-row block (the common case: all rows at once).
  bool planned = false;
  bool widen = false;
  std::shared_ptr<const kernels::cpu::MatmulPlan> full_block;
  // b packed once per execute into the workspace (kernels/cpu/packed_b.hpp) in this layout,
  // for GEMMs whose plan reads that layout; unset: b read in place.
  std::optional<kernels::cpu::PackedLayout> packed;
  // packed is b.prepacked's layout (PackedWeight, packed before the call): its buffer is
  // read, nothing is packed into the workspace.
  bool prepacked = false;
  bool full_block_packed = false;  // full_block reads the packed x2
};

// Decides widening and plans the max_rows-row GEMM (after max_rows is set).
void plan_row_gemm(RowGemmShape& s);

// Workspace bytes RowGemm needs for this shape: the packed x2 (when packed here, not
// prepacked), else the widened b and bias (when widened), else 0.
size_t row_gemm_workspace_bytes(const RowGemmShape& s);
// One line for a plan description: the GEMM a block of `rows` rows runs (oneDNN's
// implementation, and "<dtype> widened to float32 (<why>)" where this layer
// widens the operands: no native oneDNN kernel, or the machine model found fp32 faster).
std::string describe_row_gemm(const RowGemmShape& s, int64_t rows);

class RowGemm {
 public:
  // Prepares b and the bias into workspace (row_gemm_workspace_bytes(s) bytes, float-aligned).
  RowGemm(const RowGemmShape& s, void* workspace);

  // c (rows x n, row stride n) = a (rows x k, row stride k) @ b (+ bias). When a_copy is
  // non-null a's rows are also copied there verbatim (gather_out), in the same pass.
  void run(const void* a, int64_t rows, void* c, void* a_copy = nullptr) const;

  // Batched instead, for few rows per block (decode): every GEMM call streams all of b from
  // memory, so R calls of 8 rows cost R times one call of 8·R rows. stage() copies (and
  // widens) a block into `staging` at row at_row (and verbatim into a_copy), run_staged()
  // multiplies all staged rows at once.
  static size_t staging_bytes(const RowGemmShape& s, int64_t rows);
  void stage(const void* a, int64_t rows, int64_t at_row, void* staging, void* a_copy) const;
  void run_staged(const void* staging, int64_t rows, void* c) const;

  bool widened() const { return widened_; }

 private:
  // Copies rows of a to a_copy (when set) and to dst in the GEMM's input type.
  void copy_rows(const void* a, int64_t rows, void* dst, void* a_copy) const;
  // c = a_ready (the GEMM's input type, dense) @ b (+ bias), rounded to c's dtype.
  void gemm(const void* a_ready, int64_t rows, void* c) const;

  RowGemmShape s_;
  bool widened_ = false;
  const void* b_ = nullptr;         // b as the primitive reads it (fp32 copy when widened)
  const void* packed_b_ = nullptr;  // b packed (s_.packed), for plans reading that layout
  const void* bias_ = nullptr;      // likewise
};

}  // namespace commfuse::ops
