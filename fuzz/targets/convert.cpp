// commfuseConvert between any two dtypes (valid or not), commfusePackInt4 /
// commfuseUnpackInt4 and the dtype name/bits functions, on decoded arguments.
// Input: src dtype, dst dtype, flags (bit 0 saturate, bit 1 saturate passed as 2, bit 2
// null src, bit 3 null dst, bit 4 an odd int4 count for unpack), count (u16; 0: as many
// elements as the remaining bytes hold), then the source bytes (repeated to fill).
//
// Properties: the status is what commfuse.h promises for the arguments; every element is
// what SPEC §1 and the scalar reference give (convert_oracle.hpp), so the bulk loops
// agree with them; plus the SPEC rules checked on their own: saturation never yields inf or
// NaN from a number, NaN stays NaN, e4m3fn / e5m2 / hifloat8 overflow where SPEC says,
// hifloat8 has one zero, rounding is monotonic, every non-NaN code survives the round trip
// through fp32, and pack / unpack of int4 invert each other on [-8, 7].
#include <commfuse/commfuse.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "support/byte_reader.hpp"
#include "support/check.hpp"
#include "support/convert_oracle.hpp"
#include "support/decode.hpp"

using namespace commfuse_fuzz;

namespace {

constexpr size_t kMaxCount = 8192;

bool is_number_format(commfuseDataType t) {
  return is_float_format(t) || is_int_format(t);
}

size_t storage_bytes(commfuseDataType t, size_t count) {
  return (count * static_cast<size_t>(format_bits(t)) + 7) / 8;
}

// A buffer of exactly `bytes` (ASan sees one byte past it), filled from `pattern`.
std::unique_ptr<uint8_t[]> filled(size_t bytes, const uint8_t* pattern, size_t pattern_size,
                                  uint8_t otherwise) {
  auto b = std::make_unique<uint8_t[]>(bytes ? bytes : 1);
  for (size_t i = 0; i < bytes; ++i) b[i] = pattern_size ? pattern[i % pattern_size] : otherwise;
  return b;
}

void check_dtype_functions(commfuseDataType t) {
  const char* name = commfuseDataTypeName(t);
  FUZZ_REQUIRE(name != nullptr && name[0] != '\0', "commfuseDataTypeName(%d) is empty",
               static_cast<int>(t));
  int bits = 0;
  const commfuseStatus_t st = commfuseDataTypeBits(t, &bits);
  check_named_failure("commfuseDataTypeBits", st, "commfuseDataTypeBits", nullptr);
  FUZZ_REQUIRE((st == COMMFUSE_SUCCESS) == is_commfuse_dtype(t), "commfuseDataTypeBits(%d): %d",
               static_cast<int>(t), static_cast<int>(st));
  if (!is_commfuse_dtype(t)) return;
  FUZZ_REQUIRE(bits == 4 || bits == 8 || bits == 16 || bits == 32 || bits == 64,
               "commfuseDataTypeBits(%s) is %d", name, bits);
  commfuseDataType back = COMMFUSE_DATATYPE_MAX_ENUM_;
  FUZZ_REQUIRE(commfuseDataTypeFromName(name, &back) == COMMFUSE_SUCCESS && back == t,
               "commfuseDataTypeFromName(\"%s\") is %d, not %d", name, static_cast<int>(back),
               static_cast<int>(t));
}

// Any name parses to a dtype whose name is that name or an alias of it, or fails naming
// the function.
void check_name_parsing(const uint8_t* bytes, size_t n) {
  const std::string name(reinterpret_cast<const char*>(bytes), std::min<size_t>(n, 24));
  commfuseDataType t = COMMFUSE_DATATYPE_MAX_ENUM_;
  const commfuseStatus_t st = commfuseDataTypeFromName(name.c_str(), &t);
  check_named_failure("commfuseDataTypeFromName", st, "commfuseDataTypeFromName", nullptr);
  if (st == COMMFUSE_SUCCESS)
    FUZZ_REQUIRE(is_commfuse_dtype(t), "commfuseDataTypeFromName(\"%s\") gave %d", name.c_str(),
                 static_cast<int>(t));
  else
    FUZZ_REQUIRE(st == COMMFUSE_PARAM_INVALID, "commfuseDataTypeFromName(\"%s\") returned %d",
                 name.c_str(), static_cast<int>(st));
}

// The SPEC §1 rules for one fp32 input x encoded as `code` in dst.
void check_encode_rules(float x, commfuseDataType dst, uint64_t code, bool sat) {
  const float y = decode_code(dst, code);
  const char* name = commfuseDataTypeName(dst);
  if (std::isnan(x)) {
    if (is_float_format(dst)) FUZZ_REQUIRE(std::isnan(y), "%s: NaN converted to %g", name, y);
    return;
  }
  if (sat &&
      (dst == COMMFUSE_FLOAT8_E4M3FN || dst == COMMFUSE_FLOAT8_E5M2 || dst == COMMFUSE_HIFLOAT8))
    FUZZ_REQUIRE(std::isfinite(y), "%s saturating: %a converted to %g (code 0x%llx)", name, x, y,
                 static_cast<unsigned long long>(code));
  const bool neg = std::signbit(x);
  const float ax = std::fabs(x);
  if (!sat && dst == COMMFUSE_FLOAT8_E4M3FN && ax > 464.0f)
    FUZZ_REQUIRE(code == (neg ? 0xFFu : 0x7Fu), "e4m3fn: %a beyond 464 gave 0x%llx, not NaN", x,
                 static_cast<unsigned long long>(code));
  if (!sat && dst == COMMFUSE_FLOAT8_E5M2 && ax > 61440.0f)
    FUZZ_REQUIRE(code == (neg ? 0xFCu : 0x7Cu), "e5m2: %a beyond 61440 gave 0x%llx, not inf", x,
                 static_cast<unsigned long long>(code));
  if (dst == COMMFUSE_HIFLOAT8 && ax >= 40960.0f) {
    const uint64_t want = sat ? (neg ? 0xEE : 0x6E) : (neg ? 0xEF : 0x6F);
    FUZZ_REQUIRE(code == want, "hifloat8: %a (>= 40960) gave 0x%llx, not 0x%llx", x,
                 static_cast<unsigned long long>(code), static_cast<unsigned long long>(want));
  }
  if (dst == COMMFUSE_HIFLOAT8 && x == 0.0f)
    FUZZ_REQUIRE(code == 0, "hifloat8: %s0 gave 0x%llx, not 0x00", neg ? "-" : "+",
                 static_cast<unsigned long long>(code));
}

// Decoded fp32 re-encoded in its own format gives the code back (non-NaN codes; saturation
// moves the infinities, which are skipped then).
void check_round_trip(const uint8_t* codes, commfuseDataType t, const float* decoded, size_t count,
                      bool sat) {
  auto back = std::make_unique<uint8_t[]>(storage_bytes(t, count) + 1);
  const commfuseStatus_t st = commfuseConvert(decoded, COMMFUSE_FLOAT32, back.get(), t, count, sat);
  FUZZ_REQUIRE(st == COMMFUSE_SUCCESS, "commfuseConvert(float32 -> %s): %s",
               commfuseDataTypeName(t), commfuseGetLastErrorMessage());
  for (size_t i = 0; i < count; ++i) {
    if (std::isnan(decoded[i]) || (sat && std::isinf(decoded[i]))) continue;
    const uint64_t a = code_at(codes, t, i), b = code_at(back.get(), t, i);
    FUZZ_REQUIRE(a == b, "%s code 0x%llx -> %a -> 0x%llx (round trip)", commfuseDataTypeName(t),
                 static_cast<unsigned long long>(a), decoded[i],
                 static_cast<unsigned long long>(b));
  }
}

void fuzz_convert(commfuseDataType src_t, commfuseDataType dst_t, uint8_t flags, size_t count,
                  const uint8_t* rest, size_t rest_size) {
  const bool sat = flags & 3, null_src = flags & 4, null_dst = flags & 8;
  const int sat_arg = (flags & 2) ? 2 : (flags & 1);
  const bool known = is_number_format(src_t) && is_number_format(dst_t);
  const size_t src_bytes = known ? storage_bytes(src_t, count) : count;
  const size_t dst_bytes = known ? storage_bytes(dst_t, count) : count;
  auto src = filled(src_bytes, rest, rest_size, 0);
  auto dst = filled(dst_bytes, nullptr, 0, 0xEE);
  const commfuseStatus_t st = commfuseConvert(
      null_src ? nullptr : src.get(), src_t, null_dst ? nullptr : dst.get(), dst_t, count, sat_arg);
  check_named_failure("commfuseConvert", st, "convert", "commfuseConvert");
  // commfuse.h: dtypes first (uint8, int16, uint16, bool and non-dtypes are PARAM_INVALID),
  // then nothing to do for count 0, then the pointers.
  const commfuseStatus_t want = !known                 ? COMMFUSE_PARAM_INVALID
                                : count == 0           ? COMMFUSE_SUCCESS
                                : null_src || null_dst ? COMMFUSE_PARAM_NULLPTR
                                                       : COMMFUSE_SUCCESS;
  FUZZ_REQUIRE(st == want, "commfuseConvert(%d -> %d, count %zu%s%s) returned %d, expected %d: %s",
               static_cast<int>(src_t), static_cast<int>(dst_t), count,
               null_src ? ", null src" : "", null_dst ? ", null dst" : "", static_cast<int>(st),
               static_cast<int>(want), commfuseGetLastErrorMessage());
  if (st != COMMFUSE_SUCCESS || count == 0) {
    for (size_t i = 0; i < dst_bytes; ++i)
      FUZZ_REQUIRE(dst[i] == 0xEE, "commfuseConvert failed (%d) but wrote dst",
                   static_cast<int>(st));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const uint64_t got = code_at(dst.get(), dst_t, i);
    const uint64_t want_code = expected_code(src.get(), src_t, i, dst_t, sat);
    FUZZ_REQUIRE(got == want_code,
                 "commfuseConvert(%s -> %s, saturate %d) element %zu of %zu: code 0x%llx gave "
                 "0x%llx, the reference 0x%llx",
                 commfuseDataTypeName(src_t), commfuseDataTypeName(dst_t), sat, i, count,
                 static_cast<unsigned long long>(code_at(src.get(), src_t, i)),
                 static_cast<unsigned long long>(got), static_cast<unsigned long long>(want_code));
  }
  if (src_t == COMMFUSE_FLOAT32 && dst_t != COMMFUSE_FLOAT32) {
    std::vector<float> x(count);
    std::memcpy(x.data(), src.get(), count * 4);
    for (size_t i = 0; i < count; ++i)
      check_encode_rules(x[i], dst_t, code_at(dst.get(), dst_t, i), sat);
    // Rounding is monotonic: x <= x' never encodes to a larger value than x' does.
    if (is_float_format(dst_t))
      for (size_t i = 0; i + 1 < count; ++i) {
        const float a = decode_code(dst_t, code_at(dst.get(), dst_t, i));
        const float b = decode_code(dst_t, code_at(dst.get(), dst_t, i + 1));
        if (std::isnan(a) || std::isnan(b) || std::isnan(x[i]) || std::isnan(x[i + 1])) continue;
        FUZZ_REQUIRE(!(x[i] <= x[i + 1] && a > b) && !(x[i + 1] <= x[i] && b > a),
                     "%s: %a -> %g but %a -> %g (not monotonic)", commfuseDataTypeName(dst_t), x[i],
                     a, x[i + 1], b);
      }
  }
  if (dst_t == COMMFUSE_FLOAT32 && is_float_format(src_t) && src_t != COMMFUSE_FLOAT32) {
    std::vector<float> decoded(count);
    std::memcpy(decoded.data(), dst.get(), count * 4);
    check_round_trip(src.get(), src_t, decoded.data(), count, sat);
  }
}

void fuzz_pack_unpack(const uint8_t* bytes, size_t n, bool odd) {
  if (n > kMaxCount) n = kMaxCount;
  // pack: n int8 values; any outside [-8, 7] is PARAM_INVALID naming the first one.
  const auto* values = reinterpret_cast<const int8_t*>(bytes);
  size_t first_bad = n;
  for (size_t i = 0; i < n && first_bad == n; ++i)
    if (values[i] < -8 || values[i] > 7) first_bad = i;
  const size_t packed_bytes = (n + 1) / 2;
  auto packed = filled(packed_bytes, nullptr, 0, 0xB0);  // the odd count's high nibble: kept
  const commfuseStatus_t st = commfusePackInt4(values, packed.get(), n);
  check_named_failure("commfusePackInt4", st, "pack_int4", "commfusePackInt4");
  if (first_bad < n) {
    const std::string where = "src[" + std::to_string(first_bad) + "]";
    FUZZ_REQUIRE(st == COMMFUSE_PARAM_INVALID &&
                     std::strstr(commfuseGetLastErrorMessage(), where.c_str()) != nullptr,
                 "commfusePackInt4 with %s = %d returned %d: %s", where.c_str(), values[first_bad],
                 static_cast<int>(st), commfuseGetLastErrorMessage());
  } else {
    FUZZ_REQUIRE(st == COMMFUSE_SUCCESS, "commfusePackInt4 of values in [-8, 7]: %s",
                 commfuseGetLastErrorMessage());
    if (n % 2 == 1)
      FUZZ_REQUIRE((packed[packed_bytes - 1] & 0xF0) == 0xB0,
                   "commfusePackInt4 with an odd count changed the last byte's high nibble");
    auto unpacked = std::make_unique<int8_t[]>(n + 1);
    FUZZ_REQUIRE(commfuseUnpackInt4(packed.get(), unpacked.get(), n) == COMMFUSE_SUCCESS,
                 "commfuseUnpackInt4: %s", commfuseGetLastErrorMessage());
    FUZZ_REQUIRE(n == 0 || std::memcmp(unpacked.get(), values, n) == 0,
                 "commfuseUnpackInt4(commfusePackInt4(v)) != v for %zu values", n);
  }
  // unpack: any bytes give values in [-8, 7] that pack back to the same bytes.
  const size_t count = n == 0 ? 0 : 2 * n - (odd ? 1 : 0);
  auto unpacked = std::make_unique<int8_t[]>(count + 1);
  FUZZ_REQUIRE(commfuseUnpackInt4(bytes, unpacked.get(), count) == COMMFUSE_SUCCESS,
               "commfuseUnpackInt4: %s", commfuseGetLastErrorMessage());
  for (size_t i = 0; i < count; ++i)
    FUZZ_REQUIRE(unpacked[i] >= -8 && unpacked[i] <= 7, "commfuseUnpackInt4 gave %d", unpacked[i]);
  auto repacked = filled(n, bytes, n, 0);  // odd count: the last high nibble is kept
  FUZZ_REQUIRE(commfusePackInt4(unpacked.get(), repacked.get(), count) == COMMFUSE_SUCCESS,
               "commfusePackInt4 of unpacked values: %s", commfuseGetLastErrorMessage());
  FUZZ_REQUIRE(n == 0 || std::memcmp(repacked.get(), bytes, n) == 0,
               "commfusePackInt4(commfuseUnpackInt4(b)) != b for %zu bytes", n);
  // Null pointers with elements to move are PARAM_NULLPTR; count 0 needs none.
  if (n > 0)
    FUZZ_REQUIRE(commfusePackInt4(nullptr, packed.get(), 1) == COMMFUSE_PARAM_NULLPTR &&
                     commfuseUnpackInt4(bytes, nullptr, 1) == COMMFUSE_PARAM_NULLPTR,
                 "pack/unpack with a null pointer: %s", commfuseGetLastErrorMessage());
  FUZZ_REQUIRE(commfusePackInt4(nullptr, nullptr, 0) == COMMFUSE_SUCCESS &&
                   commfuseUnpackInt4(nullptr, nullptr, 0) == COMMFUSE_SUCCESS,
               "pack/unpack of 0 elements failed: %s", commfuseGetLastErrorMessage());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  const commfuseDataType src_t = decode_dtype(r), dst_t = decode_dtype(r);
  const uint8_t flags = r.u8();
  size_t count = r.u16() % (kMaxCount + 1);
  size_t rest_size = 0;
  const uint8_t* rest = r.take_rest(&rest_size);
  if (count == 0)
    count = is_number_format(src_t) ? rest_size * 8 / static_cast<size_t>(format_bits(src_t))
                                    : rest_size;
  if (count > kMaxCount) count = kMaxCount;
  check_dtype_functions(src_t);
  check_dtype_functions(dst_t);
  fuzz_convert(src_t, dst_t, flags, count, rest, rest_size);
  fuzz_pack_unpack(rest, rest_size, flags & 16);
  check_name_parsing(rest, rest_size);
  return 0;
}
