// The end of the reducing ops: add the bias once to the rank-order fp32 sum and round
// once to the output dtype (SPEC §0: one cast, at the end, round-half-to-even).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>

#include "ops/common/tensor_checks.hpp"

namespace commfuse::ops {

// acc (rows x n, dense fp32) += bias (broadcast over rows; skipped when absent), then
// dst (rows x n, dense) = acc rounded to dst_dtype. bias32 holds n floats of scratch, used
// when the bias is not already float32. acc is clobbered.
void add_bias_and_round(float* acc, int64_t rows, int64_t n, const BiasArg& bias, float* bias32,
                        void* dst, DType dst_dtype);

}  // namespace commfuse::ops
