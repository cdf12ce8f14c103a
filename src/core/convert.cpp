// commfuse::convert: any supported dtype to any other, through fp32 in cache-sized blocks
// (integer to integer goes through int64 so no precision is lost on the way).
#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/byte_ranges.hpp"
#include "core/convert_fast.hpp"
#include "core/dtype_valid.hpp"
#include "core/error.hpp"
#include "core/simd.hpp"

namespace commfuse {
namespace {

constexpr size_t kBlock = 512;  // even, so int4 blocks start on a byte boundary

// uint8, int16, uint16 and bool only travel through the collectives (byte copies): SPEC §1
// defines no rounding or range rules for them, so convert refuses them rather than guess.
bool is_data_movement_only(DType t) {
  return t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16 || t == DType::kBool;
}

void check_number_format(DType t, const char* what) {
  CF_CHECK_ARG(!is_data_movement_only(t), "convert: ", what, " ", dtype_name(t),
               " is a data-movement dtype (collectives only) with no conversion rules; "
               "convert handles float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, "
               "float8_e8m0, hifloat8, int4, int8, int32, int64");
}

// No pointer can hold more: a larger count read and wrote past any buffer (2^62 float32 to
// e4m3 ran into unmapped memory).
void check_count_fits(const char* what, size_t count, DType t) {
  if (auto refusal = detail::count_too_large(what, count, t); !refusal.empty())
    detail::throw_status(Status::kParamInvalid, std::move(refusal));
}

// A conversion between formats reads and writes in blocks (and pack / unpack change the
// element width): dst over src gave wrong values with success (fp16 to fp32 in place, 8 of
// 16 wrong; unpack_int4 in place, 6 of 8), where every other call of the API refuses
// buffers that share memory.
void check_no_overlap(const char* fn, const void* src, size_t src_bytes, const void* dst,
                      size_t dst_bytes) {
  CF_CHECK_ARG(!detail::ranges_overlap(src, src_bytes, dst, dst_bytes), fn,
               ": dst and src share memory (", dst_bytes, " bytes at dst, ", src_bytes,
               " at src): pass separate buffers");
}

bool is_integer(DType t) {
  return t == DType::kInt4 || t == DType::kInt8 || t == DType::kInt32 || t == DType::kInt64;
}

// Float to integer: round half to even, clamp to the target range, NaN -> 0.
template <typename T>
T float_to_int(float x, double lo, double hi) {
  if (std::isnan(x)) return 0;
  const double r = std::nearbyint(static_cast<double>(x));
  if (r <= lo) return static_cast<T>(lo);
  if (r >= hi) return static_cast<T>(hi);
  return static_cast<T>(r);
}

// float_to_int<int8_t> over an array, in a form that vectorizes (a libm nearbyint per value
// took most of quantize's per_token_group int8 time: 16 Mi values in ~48 ms): NaN -> 0,
// rounded to nearest even in float (the same integer as in double: a float of magnitude
// 2^23 or more is an integer already), then clamped to [-128, 127].
CF_SIMD_KERNEL_AVX512(void, f32_to_int8, (const float* src, int8_t* dst, size_t n), (src, dst, n)) {
  for (size_t i = 0; i < n; ++i) {
    const float x = src[i];
    float r = std::nearbyint(x);
    r = x == x ? r : 0.0f;
    r = r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r);
    dst[i] = static_cast<int8_t>(static_cast<int32_t>(r));
  }
}

int8_t int4_at(const uint8_t* p, size_t i) {
  const uint8_t byte = p[i / 2];
  const uint8_t nib = (i & 1) ? (byte >> 4) : (byte & 0x0F);
  return static_cast<int8_t>(static_cast<int8_t>(nib << 4) >> 4);  // sign-extend
}

void set_int4(uint8_t* p, size_t i, int8_t v) {
  const uint8_t nib = static_cast<uint8_t>(v) & 0x0F;
  uint8_t& byte = p[i / 2];
  byte = (i & 1) ? static_cast<uint8_t>((byte & 0x0F) | (nib << 4))
                 : static_cast<uint8_t>((byte & 0xF0) | nib);
}

// x as a float rounded to odd: the float toward zero, its last bit set where x is not
// exact. Rounding that once more to a narrower format (round half to even) gives x rounded
// once (the float keeps at least two more bits than bf16, fp16 and the 8-bit formats),
// where rounding x to nearest float first rounded some integers twice: int32 16842753
// (2^24 + 2^16 + 1) became 2^24 in bf16, one ulp from the nearest.
float int_to_f32_odd(int64_t x) {
  float f = static_cast<float>(x);  // to nearest, even
  constexpr float kTwo63 = 9223372036854775808.0f;
  if (f < kTwo63 && static_cast<int64_t>(f) == x) return f;  // exact (-2^63 included)
  const bool away =
      f >= kTwo63 || (x > 0 ? static_cast<int64_t>(f) > x : static_cast<int64_t>(f) < x);
  if (away) f = std::nextafter(f, 0.0f);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void to_f32(const void* src, DType t, size_t offset, float* dst, size_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::kFloat32:
      std::memcpy(dst, b + offset * 4, n * 4);
      return;
    case DType::kFloat16:
      fast::f16_to_f32(reinterpret_cast<const uint16_t*>(b) + offset, dst, n);
      return;
    case DType::kBFloat16:
      fast::bf16_to_f32(reinterpret_cast<const uint16_t*>(b) + offset, dst, n);
      return;
    case DType::kFloat8E4M3FN:
      fast::e4m3fn_to_f32(b + offset, dst, n);
      return;
    case DType::kFloat8E5M2:
      fast::e5m2_to_f32(b + offset, dst, n);
      return;
    case DType::kHiFloat8:
      fast::hif8_to_f32(b + offset, dst, n);
      return;
    case DType::kFloat8E8M0:
      fast::e8m0_to_f32(b + offset, dst, n);
      return;
    case DType::kInt8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<int8_t>(b[offset + i]);
      return;
    case DType::kInt4:
      for (size_t i = 0; i < n; ++i) dst[i] = int4_at(b, offset + i);
      return;
    case DType::kInt32: {
      const auto* s = reinterpret_cast<const int32_t*>(b) + offset;
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::kInt64: {
      const auto* s = reinterpret_cast<const int64_t*>(b) + offset;
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kBool:
      break;  // refused by convert() before any conversion
  }
  CF_ASSERT(false);
}

void from_f32(const float* src, void* dst, DType t, size_t offset, size_t n, bool sat) {
  auto* b = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::kFloat32:
      std::memcpy(b + offset * 4, src, n * 4);
      return;
    case DType::kFloat16:
      fast::f32_to_f16(src, reinterpret_cast<uint16_t*>(b) + offset, n);
      return;
    case DType::kBFloat16:
      fast::f32_to_bf16(src, reinterpret_cast<uint16_t*>(b) + offset, n);
      return;
    case DType::kFloat8E4M3FN:
      fast::f32_to_e4m3fn(src, b + offset, n, sat);
      return;
    case DType::kFloat8E5M2:
      fast::f32_to_e5m2(src, b + offset, n, sat);
      return;
    case DType::kHiFloat8:
      fast::f32_to_hif8(src, b + offset, n, sat);
      return;
    case DType::kFloat8E8M0:
      fast::f32_to_e8m0(src, b + offset, n, sat);
      return;
    case DType::kInt8:
      f32_to_int8(src, reinterpret_cast<int8_t*>(b) + offset, n);
      return;
    case DType::kInt4:
      for (size_t i = 0; i < n; ++i) set_int4(b, offset + i, float_to_int<int8_t>(src[i], -8, 7));
      return;
    case DType::kInt32: {
      auto* d = reinterpret_cast<int32_t*>(b) + offset;
      for (size_t i = 0; i < n; ++i)
        d[i] = float_to_int<int32_t>(src[i], -2147483648.0, 2147483647.0);
      return;
    }
    case DType::kInt64: {
      auto* d = reinterpret_cast<int64_t*>(b) + offset;
      // 2^63 is exact in double; anything at or above it saturates.
      for (size_t i = 0; i < n; ++i) {
        const float x = src[i];
        d[i] = std::isnan(x)                 ? 0
               : x >= 9223372036854775808.0f ? INT64_MAX
               : x < -9223372036854775808.0f ? INT64_MIN
                                             : static_cast<int64_t>(std::nearbyint(x));
      }
      return;
    }
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kBool:
      break;  // refused by convert() before any conversion
  }
  CF_ASSERT(false);
}

int64_t int_at(const void* src, DType t, size_t i) {
  const auto* b = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::kInt4:
      return int4_at(b, i);
    case DType::kInt8:
      return reinterpret_cast<const int8_t*>(b)[i];
    case DType::kInt32:
      return reinterpret_cast<const int32_t*>(b)[i];
    case DType::kInt64:
      return reinterpret_cast<const int64_t*>(b)[i];
    default:
      break;
  }
  CF_ASSERT(false);
  return 0;
}

void set_int(void* dst, DType t, size_t i, int64_t v) {
  auto* b = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::kInt4:
      set_int4(b, i, static_cast<int8_t>(std::clamp<int64_t>(v, -8, 7)));
      return;
    case DType::kInt8:
      reinterpret_cast<int8_t*>(b)[i] = static_cast<int8_t>(std::clamp<int64_t>(v, -128, 127));
      return;
    case DType::kInt32:
      reinterpret_cast<int32_t*>(b)[i] =
          static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
      return;
    case DType::kInt64:
      reinterpret_cast<int64_t*>(b)[i] = v;
      return;
    default:
      break;
  }
  CF_ASSERT(false);
}

}  // namespace

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t count,
             bool saturate) {
  CF_CHECK_ARG(detail::dtype_is_valid(src_dtype), "convert: src_dtype value ",
               static_cast<int>(src_dtype), " is not a commfuse dtype");
  CF_CHECK_ARG(detail::dtype_is_valid(dst_dtype), "convert: dst_dtype value ",
               static_cast<int>(dst_dtype), " is not a commfuse dtype");
  check_number_format(src_dtype, "src_dtype");
  check_number_format(dst_dtype, "dst_dtype");
  if (count == 0) return;
  CF_CHECK_NOTNULL(src, "convert: src is null (count ", count, ")");
  CF_CHECK_NOTNULL(dst, "convert: dst is null (count ", count, ")");
  for (const DType t : {src_dtype, dst_dtype}) check_count_fits("convert", count, t);
  if (src_dtype != dst_dtype)
    check_no_overlap("convert", src, dtype_storage_bytes(src_dtype, count), dst,
                     dtype_storage_bytes(dst_dtype, count));

  // The same format is a copy, except where saturating changes codes: the infinities of
  // e5m2 and HiFloat8 (SPEC §1: saturating gives the largest finite value instead).
  if (src_dtype == DType::kInt4 && dst_dtype == DType::kInt4) {
    // Whole bytes, then an odd count's last element alone: dst's unused high nibble is kept.
    const int8_t last = int4_at(static_cast<const uint8_t*>(src), count - 1);
    std::memmove(dst, src, count / 2);
    if (count % 2 != 0) set_int4(static_cast<uint8_t*>(dst), count - 1, last);
    return;
  }
  if (src_dtype == dst_dtype) {
    std::memmove(dst, src, dtype_storage_bytes(src_dtype, count));
    const bool with_inf = src_dtype == DType::kFloat8E5M2 || src_dtype == DType::kHiFloat8;
    if (saturate && with_inf) {  // +-inf -> +-largest finite; every other code as it was
      const uint8_t inf = src_dtype == DType::kFloat8E5M2 ? 0x7C : 0x6F;
      auto* codes = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < count; ++i)
        if ((codes[i] & 0x7F) == inf) codes[i] = static_cast<uint8_t>(codes[i] - 1);
    }
    return;
  }
  if (is_integer(src_dtype) && is_integer(dst_dtype)) {
    for (size_t i = 0; i < count; ++i) set_int(dst, dst_dtype, i, int_at(src, src_dtype, i));
    return;
  }
  const simd::StandardFloatMode fp_mode;  // integer targets round half to even in any mode
  float block[kBlock];
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t n = std::min(kBlock, count - off);
    if (src_dtype == DType::kFloat32) {
      from_f32(static_cast<const float*>(src) + off, dst, dst_dtype, off, n, saturate);
    } else if (dst_dtype == DType::kFloat32) {
      to_f32(src, src_dtype, off, static_cast<float*>(dst) + off, n);
    } else if (src_dtype == DType::kInt32 || src_dtype == DType::kInt64) {
      // Not exact in float: rounded to odd first, so that the target rounds them once.
      for (size_t i = 0; i < n; ++i) block[i] = int_to_f32_odd(int_at(src, src_dtype, off + i));
      from_f32(block, dst, dst_dtype, off, n, saturate);
    } else {
      to_f32(src, src_dtype, off, block, n);
      from_f32(block, dst, dst_dtype, off, n, saturate);
    }
  }
}

void pack_int4(const int8_t* src, uint8_t* dst, size_t count) {
  if (count == 0) return;
  CF_CHECK_NOTNULL(src, "pack_int4: src is null");
  CF_CHECK_NOTNULL(dst, "pack_int4: dst is null");
  check_count_fits("pack_int4", count, DType::kInt8);
  // In place (dst == src) is safe: byte i/2 is written after byte i was read.
  if (static_cast<const void*>(dst) != static_cast<const void*>(src))
    check_no_overlap("pack_int4", src, count, dst, (count + 1) / 2);
  for (size_t i = 0; i < count; ++i)
    CF_CHECK_ARG(src[i] >= -8 && src[i] <= 7, "pack_int4: src[", i, "] is ",
                 static_cast<int>(src[i]), " but int4 holds [-8, 7]");
  for (size_t i = 0; i < count; ++i) set_int4(dst, i, src[i]);
}

// Whole bytes: element 2j in the low nibble, 2j + 1 in the high one, each sign-extended
// (int4_at's values, in a loop that vectorizes: alltoall_quant_matmul's A4W4 / A16W4 unpack
// every row and weight with it).
CF_SIMD_KERNEL(void, unpack_int4_bytes, (const uint8_t* src, int8_t* dst, size_t bytes),
               (src, dst, bytes)) {
  for (size_t j = 0; j < bytes; ++j) {
    const uint8_t b = src[j];
    dst[2 * j] = static_cast<int8_t>(static_cast<int8_t>(b << 4) >> 4);
    dst[2 * j + 1] = static_cast<int8_t>(static_cast<int8_t>(b) >> 4);
  }
}

void unpack_int4(const uint8_t* src, int8_t* dst, size_t count) {
  if (count == 0) return;
  CF_CHECK_NOTNULL(src, "unpack_int4: src is null");
  CF_CHECK_NOTNULL(dst, "unpack_int4: dst is null");
  check_count_fits("unpack_int4", count, DType::kInt8);
  check_no_overlap("unpack_int4", src, (count + 1) / 2, dst, count);
  unpack_int4_bytes(src, dst, count / 2);
  if (count % 2 != 0) dst[count - 1] = int4_at(src, count - 1);
}

}  // namespace commfuse
