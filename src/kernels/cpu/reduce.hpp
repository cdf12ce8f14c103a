// Rank-order reduction: the one place where cross-rank sums are computed, so every
// transport produces the same bits (SPEC §0: fp32 accumulation in rank order 0..R-1, one
// rounding to the output dtype at the end).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>

namespace commfuse::kernels::cpu {

// True for the dtypes collectives can sum: float32, float16, bfloat16, int8, int32.
// (uint8, int16, uint16 and bool move but do not sum: SPEC defines no sum for them.)
bool reducible(DType dtype);
// "float32, float16, bfloat16, int8, int32": the list rejection messages quote.
const char* reducible_names();

// dst[i] = cast(src[0][i] + src[1][i] + ... + src[n_src - 1][i]), summed left to right.
// Floats accumulate in fp32 and round once (RNE); integers sum exactly in int64 and
// saturate to the dtype's range. dst may alias any src.
void reduce_sum(const void* const* src, int n_src, void* dst, size_t count, DType dtype);

// acc[i] += x[i] for i < n (fp32, vectorized for the running CPU); the step of reduce_sum,
// for epilogues that sum the ranks' partials themselves in the same order.
void add_f32(float* acc, const float* x, size_t n);

}  // namespace commfuse::kernels::cpu
