// What commfuse::PackedWeight holds (include/commfuse/commfuse.hpp): x2 packed once into the
// blocked layout the native 16-bit GEMM reads (kernels/cpu/packed_b.hpp), or an int8 x2 (an
// int4 one unpacked first) as the int GEMM prepares it (kernels/cpu/int_matmul.hpp:
// prepare_b), and which x2 it was
// packed from, so that each call can check it is given the same tensor. Ops take it through
// WeightLayout::prepacked (tensor_checks.hpp) or their problem's packed_x2: RowGemm,
// QuantRowGemm and alltoall_quant_matmul's QuantGemm read the packed buffer where their plan
// reads that layout, instead of preparing x2 in the workspace per execute.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cpu/int_matmul.hpp"
#include "kernels/cpu/packed_b.hpp"
#include "ops/common/op_context.hpp"
#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

struct PackedWeightImpl {
  // The x2 packed: buffer, dtype, shape and layout (WeightLayout's terms).
  const void* source = nullptr;
  DType dtype = DType::kFloat32;
  int64_t k = 0;
  int64_t n = 0;
  bool transposed = false;
  int64_t ld = 0;
  // float16 / bfloat16: the packed layout; none: nothing packed (see why_not).
  std::optional<kernels::cpu::PackedLayout> layout;
  // int8 / int4: the int GEMM plan whose prepare_b wrote the buffer (its descriptor in int_desc,
  // for the plan-cache key); null: nothing prepared (see why_not).
  std::shared_ptr<const kernels::cpu::IntMatmulPlan> int_plan;
  kernels::cpu::IntMatmulDesc int_desc;
  int int_threads = 0;  // the compute threads int_plan was made for (its layout may follow)
  std::string why_not;
  std::shared_ptr<uint8_t> buffer;  // bytes, 64-byte aligned
  size_t bytes = 0;

  bool packed() const { return layout.has_value() || int_plan != nullptr; }
  const void* data() const { return buffer.get(); }
};

// Packs x2 (PackedWeight's constructor); InvalidArgument naming the argument for a bad x2.
std::unique_ptr<PackedWeightImpl> pack_weight(const TensorView& x2, int64_t rows);

// An op's packed_x2 option, checked against the call's x2 (w: what check_x2 returned):
// null, or packed from this very x2 (buffer, dtype, shape, strides); host tensors only.
// Returns the packed form the GEMMs may read (null: none, or nothing was packed).
const PackedWeightImpl* check_packed_x2(const OpContext& ctx, const PackedWeight* packed,
                                        const TensorView& x2, const WeightLayout& w, Device device);
// The alltoall ops' form: a dense x2 stored (R*H, N), or (N, R*H) with transposeX2, packed
// from its (R*H, N) view (x2, or x2.t()).
const PackedWeightImpl* check_alltoall_packed_x2(const OpContext& ctx, const PackedWeight* packed,
                                                 const TensorView& x2, bool transpose_x2,
                                                 Device device);

}  // namespace commfuse::ops
