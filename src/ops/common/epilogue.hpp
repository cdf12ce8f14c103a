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

// The same in one pass over the ranks' partials, read in place (shm slots): dst (rows x n,
// dense) = round(((parts[0] + parts[1]) + ... + parts[n_parts - 1]) + bias32). The
// operations and their order are those of reduce_sum followed by add_bias_and_round, so
// the bits are the same. bias32: n floats, or null for no bias. dst must not alias a part.
void sum_bias_round(const float* const* parts, int n_parts, int64_t rows, int64_t n,
                    const float* bias32, void* dst, DType dst_dtype);

// The bias as n fp32 values (SPEC §0: the bias is added in fp32); nothing when absent.
void widen_bias(const BiasArg& bias, int64_t n, float* bias32);

}  // namespace commfuse::ops
