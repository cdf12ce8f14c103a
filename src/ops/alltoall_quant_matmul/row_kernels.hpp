// The row loops alltoall_quant_matmul's schedules share (row_kernels.cpp): one
// implementation, so the fused and unfused schedules do the same fp32 operations in the same
// order and give the same bits.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>

namespace commfuse::ops::a2aq {

// v[i] *= smooth[i]; returns max |v[i]|.
float mul_abs_max(float* v, const float* smooth, size_t n);
// y = f32(acc) * x2_scale[j] * s + bias[j] for one output row (bias32 null: no bias).
void dequant_row(const int32_t* acc, const float* x2_scale, float s, const float* bias32, float* y,
                 size_t n);
// A4W4: y (+)= f32(acc) * s * x2_scale[j], one source segment's partial product.
void dequant_segment(const int32_t* acc, const float* x2_scale, float s, float* y, size_t n,
                     bool first);
void add_bias(float* y, const float* bias32, size_t n);
// n fp32 values rounded (RNE) to t: float16, bfloat16 or float32.
void store_row(const float* y, DType t, void* dst, size_t n);
// n float16 / bfloat16 values widened to fp32.
void widen_half(const void* src, DType t, float* dst, size_t n);
// A16's dynamic per-token quantization of one permuted row, widened to k floats in row:
// times the smooth scale (null: none), in place; amax over the whole row; the codes to q.
// Returns the row's scale.
float quantize_row(float* row, size_t k, const float* smooth, int qmax, int8_t* q);

}  // namespace commfuse::ops::a2aq
