// The problem a valid quant_all_reduce / quant_reduce_scatter call has (SPEC §4), decoded
// first so the tensors default to consistent shapes: one byte picks the format (K-G: int8,
// hifloat8, e4m3fn, e5m2 with float32 scales per 128; MX: e4m3fn, e5m2 with e8m0 scales per
// 32) and the output dtype, then bs, H in groups (a multiple of the format's unit) and an
// optional batch (x becomes (b, bs, H)).
#pragma once

#include <commfuse/commfuse.h>

#include <cstdint>
#include <vector>

#include "support/byte_reader.hpp"

namespace commfuse_fuzz {

struct QuantProblem {
  explicit QuantProblem(ByteReader& r);

  commfuseDataType x_dtype, scale_dtype, out_dtype;
  std::vector<int64_t> x_shape, scale_shape;
  std::vector<int64_t> scattered_shape;  // quant_reduce_scatter's output at W = 1: (BS, H)
};

}  // namespace commfuse_fuzz
