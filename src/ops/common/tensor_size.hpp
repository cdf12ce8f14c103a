// Whether a tensor's size is an int64 at all. Shapes come from callers (C descriptors,
// TensorView fields), and every stride, element count and byte count derived from them is
// an int64 product: a shape whose product overflows describes no memory there can be, and
// computing with it would be undefined behaviour, so it is rejected first.
#pragma once

#include <commfuse/commfuse.hpp>

namespace commfuse::ops {

// The product of t's non-zero dims, times its element size, is at most INT64_MAX bytes:
// then numel(), every contiguous stride and every byte count of t fit in an int64. t's dims
// must be non-negative; an unknown dtype counts as one byte per element.
bool size_fits_int64(const TensorView& t);
// The same for the bytes its strides span (to its last element, strides of any sign; a dim
// of size 1 is never stepped): every element's byte offset then fits an int64. A stride
// of 2^62 in a 5-row x2 spanned 2^64 + a few bytes, which wrapped to a few bytes, so the
// call was planned and its GEMM's row addresses wrapped too.
bool span_fits_int64(const TensorView& t);

}  // namespace commfuse::ops
