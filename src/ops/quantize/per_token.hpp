// quantize / dequantize, mode "per_token" (per_token.cpp). Arguments already checked for
// presence and density by the caller (quantize.cpp); fn names the function in errors.
#pragma once

#include <commfuse/commfuse.hpp>

namespace commfuse::ops {

void quantize_per_token(const char* fn, const TensorView& x, const TensorView& q,
                        const TensorView& scales);
void dequantize_per_token(const char* fn, const TensorView& q, const TensorView& scales,
                          const TensorView& output);

}  // namespace commfuse::ops
