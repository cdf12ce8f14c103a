#include "support/convert_oracle.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/convert_ref.hpp"

namespace commfuse_fuzz {
namespace {

namespace ref = commfuse::ref;

uint32_t f32_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

float f32_from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// SPEC §1 / README: float -> integer rounds half to even, saturates, NaN -> 0. Compared in
// double, where the int64 bounds are exact powers of two.
int64_t float_to_int(float x, int64_t lo, int64_t hi) {
  if (std::isnan(x)) return 0;
  const double r = std::nearbyint(static_cast<double>(x));
  if (r <= static_cast<double>(lo)) return lo;
  if (r >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(r);
}

void int_range(commfuseDataType t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case COMMFUSE_INT4:
      *lo = -8, *hi = 7;
      return;
    case COMMFUSE_INT8:
      *lo = INT8_MIN, *hi = INT8_MAX;
      return;
    case COMMFUSE_INT32:
      *lo = INT32_MIN, *hi = INT32_MAX;
      return;
    default:
      *lo = INT64_MIN, *hi = INT64_MAX;
  }
}

uint64_t int_code(commfuseDataType t, int64_t v) {
  const int bits = format_bits(t);
  return bits == 64 ? static_cast<uint64_t>(v)
                    : static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
}

uint64_t encode(commfuseDataType t, float x, bool sat) {
  switch (t) {
    case COMMFUSE_FLOAT32:
      return f32_bits(x);
    case COMMFUSE_FLOAT16:
      return ref::f32_to_f16(x);
    case COMMFUSE_BFLOAT16:
      return ref::f32_to_bf16(x);
    case COMMFUSE_FLOAT8_E4M3FN:
      return ref::f32_to_e4m3fn(x, sat);
    case COMMFUSE_FLOAT8_E5M2:
      return ref::f32_to_e5m2(x, sat);
    case COMMFUSE_HIFLOAT8:
      return ref::f32_to_hif8(x, sat);
    case COMMFUSE_FLOAT8_E8M0:
      return ref::f32_to_e8m0(x, sat);
    default: {
      int64_t lo, hi;
      int_range(t, &lo, &hi);
      return int_code(t, float_to_int(x, lo, hi));
    }
  }
}

}  // namespace

bool is_float_format(commfuseDataType t) {
  switch (t) {
    case COMMFUSE_FLOAT32:
    case COMMFUSE_FLOAT16:
    case COMMFUSE_BFLOAT16:
    case COMMFUSE_FLOAT8_E4M3FN:
    case COMMFUSE_FLOAT8_E5M2:
    case COMMFUSE_HIFLOAT8:
    case COMMFUSE_FLOAT8_E8M0:
      return true;
    default:
      return false;
  }
}

bool is_int_format(commfuseDataType t) {
  return t == COMMFUSE_INT4 || t == COMMFUSE_INT8 || t == COMMFUSE_INT32 || t == COMMFUSE_INT64;
}

int format_bits(commfuseDataType t) {
  switch (t) {
    case COMMFUSE_INT4:
      return 4;
    case COMMFUSE_INT8:
    case COMMFUSE_FLOAT8_E4M3FN:
    case COMMFUSE_FLOAT8_E5M2:
    case COMMFUSE_HIFLOAT8:
    case COMMFUSE_FLOAT8_E8M0:
      return 8;
    case COMMFUSE_FLOAT16:
    case COMMFUSE_BFLOAT16:
      return 16;
    case COMMFUSE_FLOAT32:
    case COMMFUSE_INT32:
      return 32;
    default:
      return 64;
  }
}

uint64_t code_at(const uint8_t* buf, commfuseDataType t, size_t i) {
  const int bits = format_bits(t);
  if (bits == 4) return (i & 1) ? buf[i / 2] >> 4 : buf[i / 2] & 0x0F;
  uint64_t code = 0;
  std::memcpy(&code, buf + i * (bits / 8), bits / 8);  // little-endian
  return code;
}

float decode_code(commfuseDataType t, uint64_t code) {
  switch (t) {
    case COMMFUSE_FLOAT32:
      return f32_from_bits(static_cast<uint32_t>(code));
    case COMMFUSE_FLOAT16:
      return ref::f16_to_f32(static_cast<uint16_t>(code));
    case COMMFUSE_BFLOAT16:
      return ref::bf16_to_f32(static_cast<uint16_t>(code));
    case COMMFUSE_FLOAT8_E4M3FN:
      return ref::e4m3fn_to_f32(static_cast<uint8_t>(code));
    case COMMFUSE_FLOAT8_E5M2:
      return ref::e5m2_to_f32(static_cast<uint8_t>(code));
    case COMMFUSE_HIFLOAT8:
      return ref::hif8_to_f32(static_cast<uint8_t>(code));
    case COMMFUSE_FLOAT8_E8M0:
      return ref::e8m0_to_f32(static_cast<uint8_t>(code));
    default:
      return static_cast<float>(int_value(t, code));
  }
}

int64_t int_value(commfuseDataType t, uint64_t code) {
  const int bits = format_bits(t);
  if (bits == 64) return static_cast<int64_t>(code);
  const uint64_t sign = uint64_t{1} << (bits - 1);
  return static_cast<int64_t>(code ^ sign) - static_cast<int64_t>(sign);  // sign-extend
}

uint64_t expected_code(const uint8_t* src, commfuseDataType src_t, size_t i, commfuseDataType dst_t,
                       bool saturate) {
  const uint64_t code = code_at(src, src_t, i);
  if (src_t == dst_t) return code;  // a copy, bits and all (NaN payloads too)
  if (is_int_format(src_t) && is_int_format(dst_t)) {
    int64_t lo, hi;
    int_range(dst_t, &lo, &hi);
    return int_code(dst_t, std::clamp(int_value(src_t, code), lo, hi));
  }
  return encode(dst_t, decode_code(src_t, code), saturate);
}

}  // namespace commfuse_fuzz
