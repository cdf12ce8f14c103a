// The input format's building blocks (fuzz/README.md lists the whole layout). Each value
// starts with a selector byte: small selectors are ordinary values, the top ones the edge
// cases validation must survive (negative, 2^31, 2^62, INT64_MAX/MIN, any power of two and
// its neighbours, 8 raw bytes). Zero
// always decodes to the ordinary case, so mutations mostly move one argument at a time.
#pragma once

#include <commfuse/commfuse.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "support/byte_reader.hpp"

namespace commfuse_fuzz {

// A dimension: 0..191, 64..3072 in steps of 64 (0xC0..0xEF), then the edge cases.
int64_t decode_dim(ByteReader& r);
// A problem dimension (m, k, n, BS, H, ...) the targets derive canonical shapes from: 0
// gives `usual`, 1..0xBF give 0..190, then as decode_dim.
int64_t decode_size(ByteReader& r, int64_t usual);
// A stride in elements: 0..127, -1..-64 (0x80..0xBF), then as decode_dim from 0xC0.
int64_t decode_stride(ByteReader& r);
// An int64 attribute: 0 gives `usual`, 1..0xEF give -16..222, then the edge cases.
int64_t decode_int(ByteReader& r, int64_t usual);
// A C int used as a bool: 0, 1, or values like -1, 2, INT_MIN that also mean true.
int decode_bool_int(ByteReader& r);
// A dtype: 0..14 index the 15 commfuse dtypes, 0xFF reads a raw int32, others are raw values
// (mostly not dtypes: 15, 16, 200, ...).
commfuseDataType decode_dtype(ByteReader& r);
bool is_commfuse_dtype(commfuseDataType t);
// One of the dtypes the matmuls compute in: float16 (0), bfloat16, float32, by the byte mod 3.
commfuseDataType decode_float_dtype(ByteReader& r);

// The SPEC §6 (quantized) form of the matmul targets, chosen by bits 4-6 of the call flags
// when bit 7 is clear (so 0, every older input, is the V1 call on float_dt): 1 the V2 entry
// point on float_dt (scales usual NULL), 2 A8W8 (x1_scale per token), 3 FP8 e4m3 x e4m3,
// 4 e4m3 x e5m2, 5 e5m2 x e5m2, 6 HiF8, 7 A8W8 with a bias (int32 where int32_bias_ok).
// Quantized forms: output bfloat16, x2_scale (n,) fp32, x1_scale (m,) or (1,) fp32.
struct MatmulMode {
  bool v2 = false;
  bool quant = false;
  commfuseDataType a = COMMFUSE_FLOAT32, b = COMMFUSE_FLOAT32, out = COMMFUSE_FLOAT32;
  commfuseDataType bias = COMMFUSE_FLOAT32;
  bool bias_present = false;  // the usual bias (otherwise NULL)
  bool per_token = false;     // the usual x1_scale is (m,), else (1,)
};
MatmulMode matmul_mode(uint8_t call_flags, commfuseDataType float_dt, bool int32_bias_ok);

// A C string: selectors below 0xC0 give `usual`; then one of `wrong`, nullptr, "", or up to
// 255 raw bytes (cut at the first NUL, as C reads them). `storage` keeps the raw bytes.
const char* decode_string(ByteReader& r, const char* usual,
                          std::initializer_list<const char*> wrong, std::string& storage);

// "sum" or a wrong reduce_op / reduceOp.
const char* decode_reduce_op(ByteReader& r, std::string& storage);

}  // namespace commfuse_fuzz
