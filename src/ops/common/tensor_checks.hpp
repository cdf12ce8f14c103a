// Argument checks shared by the matmul+collective ops. Each rejects through the OpContext
// (PARAM_NULLPTR / PARAM_INVALID naming the op, the rank and the argument, SPEC §0), so
// every op's validate.cpp reads as a list of its rules.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ops/common/op_context.hpp"

namespace commfuse::ops {

// "(8, 64)"
std::string shape_str(const TensorView& t);

// Every tensor of a call on one device: the first present tensor's; a later one elsewhere,
// or a device that is not cpu or cuda:<index >= 0>, is PARAM_INVALID naming the tensor.
// Absent tensors (nullptr or ndim 0) are skipped. Reads no tensor data.
struct NamedTensor {
  const char* name;
  const TensorView* t;  // null: not given
};
Device check_devices(const OpContext& ctx, std::initializer_list<NamedTensor> tensors);
// The optional tensor's view, or null when absent (for check_devices).
inline const TensorView* given(const std::optional<TensorView>& t) {
  return t ? &*t : nullptr;
}

// A required tensor: present (an absent view, a null C pointer, is PARAM_NULLPTR), a
// valid dtype, non-negative dims, data non-null unless it has no elements.
void check_present(const OpContext& ctx, const char* name, const TensorView& t);
// fp16, bf16 or fp32: the dtypes the ops compute in.
void check_float_dtype(const OpContext& ctx, const char* name, const TensorView& t);
void check_same_dtype(const OpContext& ctx, const char* name, const TensorView& t,
                      const char* ref_name, DType ref);
void check_ndim(const OpContext& ctx, const char* name, const TensorView& t, int ndim);
// Row-major dense (x1 may not be a transposed view, SPEC §0; outputs are written densely).
void check_contiguous(const OpContext& ctx, const char* name, const TensorView& t);
// SPEC §0: x2 may be passed transposed, an (n, k) buffer viewed as (k, n). For the ops that
// read a dense x2 (the alltoall ops): such a view (2-D, strides (1, rows), not int4) as the
// dense buffer it views, with *transposed flipped (transposeX2 over that buffer); any other
// view as it is.
TensorView as_dense_x2(const TensorView& x2, bool* transposed);
// shape == want; `meaning` spells the expected shape in the op's terms, e.g. "(m·R, n)".
void check_shape(const OpContext& ctx, const char* name, const TensorView& t,
                 std::initializer_list<int64_t> want, const char* meaning);

// Outputs that share bytes with an input (or another output) are PARAM_INVALID naming both:
// an op reads inputs while it writes outputs, piece by piece and rank by rank, so a shared
// byte gave silently wrong results, different per rank and per schedule (seen: alltoall_out
// over x1, all_gather_matmul's output over x2, x1 over a peer's block of gather_out). The
// in-place forms an op supports are simply not listed as pairs. Absent tensors (null
// pointer) and tensors without elements overlap nothing. Reads no tensor data.
void check_disjoint(const OpContext& ctx, std::initializer_list<NamedTensor> outputs,
                    std::initializer_list<NamedTensor> inputs);
// Whether two tensors' element spans share a byte (strided spans from first to last
// element; a tensor without elements shares none). check_disjoint's test; reads no data.
bool share_bytes(const TensorView& a, const TensorView& b);

struct PackedWeightImpl;

// x2 as the GEMM reads it: (k, n) row-major with row stride ld, or a transposed view of an
// (n, k) buffer with row stride ld.
struct WeightLayout {
  const void* data = nullptr;
  int64_t n = 0;
  bool transposed = false;
  int64_t ld = 0;
  // x2 packed ahead of the call (the options' packed_x2, packed_weight.hpp; null: none):
  // the GEMMs read it where their plan reads its layout, else data as above.
  const PackedWeightImpl* prepacked = nullptr;
};
// x2 (2-D, shape (k, n)) as one of the layouts above: w's n, transposed and ld set. False
// when its strides are neither (the ops' and PackedWeight's one rule).
bool weight_layout(const TensorView& x2, WeightLayout& w);
// x2: present, 2-D, dtype of x1 (or a SPEC §6 pair for quantized x1), dim 0 == k (named in the
// message), n >= 1, and either layout above.
WeightLayout check_x2(const OpContext& ctx, const TensorView& x2, DType x1_dtype, int64_t k);

struct BiasArg {
  const void* data = nullptr;  // null: no bias
  DType dtype = DType::kFloat32;
};
// Optional bias: 1-D (n,), contiguous, dtype of x1 or float32.
BiasArg check_bias(const OpContext& ctx, const std::optional<TensorView>& bias, DType x1_dtype,
                   int64_t n);

// 0 (automatic) or 1..64 chunks per rank block.
void check_comm_turn(const OpContext& ctx, int64_t comm_turn);
// "sum" only (SPEC §2).
void check_reduce_op(const OpContext& ctx, std::string_view reduce_op);
// The op's world_size argument must equal the group's size.
void check_world_size(const OpContext& ctx, int world_size);

}  // namespace commfuse::ops
