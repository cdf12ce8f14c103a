// What commfuseConvert must produce, element by element, written from SPEC §1 and the
// scalar reference (core/convert_ref.hpp) instead of the bulk loops under test: decode to
// fp32, encode into the target; integers to integers directly (clamped); float to integer
// rounds half to even and saturates, NaN -> 0.
#pragma once

#include <commfuse/commfuse.h>

#include <cstddef>
#include <cstdint>

namespace commfuse_fuzz {

bool is_float_format(commfuseDataType t);  // fp32, fp16, bf16, the fp8s, hifloat8, e8m0
bool is_int_format(commfuseDataType t);    // int4, int8, int32, int64
int format_bits(commfuseDataType t);

// Element i of a buffer of dtype t, as its raw code (int4: the nibble) ...
uint64_t code_at(const uint8_t* buf, commfuseDataType t, size_t i);
// ... decoded (float formats exactly; integers converted as commfuse does, through float).
float decode_code(commfuseDataType t, uint64_t code);
int64_t int_value(commfuseDataType t, uint64_t code);  // integer formats only

// The code element i of convert(src -> dst, saturate) must have.
uint64_t expected_code(const uint8_t* src, commfuseDataType src_t, size_t i, commfuseDataType dst_t,
                       bool saturate);

}  // namespace commfuse_fuzz
