#include "support/decode.hpp"

#include <climits>
#include <cstring>
#include <iterator>

namespace commfuse_fuzz {
namespace {

constexpr commfuseDataType kDTypes[] = {
    COMMFUSE_FLOAT16,     COMMFUSE_BFLOAT16, COMMFUSE_FLOAT32,       COMMFUSE_INT8,
    COMMFUSE_INT4,        COMMFUSE_HIFLOAT8, COMMFUSE_FLOAT8_E4M3FN, COMMFUSE_FLOAT8_E5M2,
    COMMFUSE_FLOAT8_E8M0, COMMFUSE_INT32,    COMMFUSE_INT64,         COMMFUSE_UINT8,
    COMMFUSE_INT16,       COMMFUSE_UINT16,   COMMFUSE_BOOL,
};

// Selectors 0xF0..0xFF of every integer format: the values overflow checks must handle.
int64_t edge_value(uint8_t sel, ByteReader& r) {
  switch (sel) {
    case 0xF0:
      return -1;
    case 0xF1:
      return -2 - static_cast<int64_t>(r.u8());
    case 0xF2:
      return int64_t{1} << 31;
    case 0xF3:
      return (int64_t{1} << 32) + r.u8();
    case 0xF4:
      return 3037000500;  // just above sqrt(2^63): the product of two overflows int64
    case 0xF5:
      return int64_t{1} << 62;
    case 0xF6:
      return INT64_MAX;
    case 0xF7:
      return INT64_MIN;
    case 0xF8:
      return int64_t{1} << 21;  // three of these multiply to 2^63
    // Powers of two and their neighbours: products of dims (and of dims and element sizes)
    // land exactly on 2^61..2^64, where int64 and size_t arithmetic overflows.
    case 0xF9:
      return int64_t{1} << (r.u8() % 63);
    case 0xFA:
      return (int64_t{1} << (r.u8() % 63)) - 1;
    case 0xFB:
      return (int64_t{1} << (r.u8() % 63)) + 1;
    default:
      return r.i64();
  }
}

}  // namespace

int64_t decode_dim(ByteReader& r) {
  const uint8_t b = r.u8();
  if (b < 0xC0) return b;
  if (b < 0xF0) return (b - 0xBF) * 64;
  return edge_value(b, r);
}

int64_t decode_size(ByteReader& r, int64_t usual) {
  const uint8_t b = r.u8();
  if (b == 0) return usual;
  if (b < 0xC0) return b - 1;
  if (b < 0xF0) return (b - 0xBF) * 64;
  return edge_value(b, r);
}

int64_t decode_stride(ByteReader& r) {
  const uint8_t b = r.u8();
  if (b < 0x80) return b;
  if (b < 0xC0) return -(b - 0x7F);
  if (b < 0xF0) return (b - 0xBF) * 64;
  return edge_value(b, r);
}

int64_t decode_int(ByteReader& r, int64_t usual) {
  const uint8_t b = r.u8();
  if (b == 0) return usual;
  if (b < 0xF0) return static_cast<int64_t>(b) - 0x11;
  return edge_value(b, r);
}

int decode_bool_int(ByteReader& r) {
  switch (const uint8_t b = r.u8()) {
    case 0:
    case 1:
      return b;
    case 2:
      return -1;
    case 3:
      return 2;
    case 4:
      return INT_MIN;
    case 5:
      return INT_MAX;
    default:
      return b & 1;
  }
}

commfuseDataType decode_dtype(ByteReader& r) {
  const uint8_t b = r.u8();
  if (b < std::size(kDTypes)) return kDTypes[b];
  if (b == 0xFF) return static_cast<commfuseDataType>(static_cast<int32_t>(r.u32()));
  return static_cast<commfuseDataType>(b);
}

commfuseDataType decode_float_dtype(ByteReader& r) {
  constexpr commfuseDataType kFloats[] = {COMMFUSE_FLOAT16, COMMFUSE_BFLOAT16, COMMFUSE_FLOAT32};
  return kFloats[r.u8() % 3];
}

MatmulMode matmul_mode(uint8_t call_flags, commfuseDataType float_dt, bool int32_bias_ok) {
  MatmulMode mm;
  mm.a = mm.b = mm.out = mm.bias = float_dt;
  const int form = (call_flags & 0x80) != 0 ? 0 : (call_flags >> 4) & 7;
  mm.v2 = form >= 1;
  if (form < 2) return mm;
  constexpr commfuseDataType e4 = COMMFUSE_FLOAT8_E4M3FN, e5 = COMMFUSE_FLOAT8_E5M2;
  const commfuseDataType a[] = {COMMFUSE_INT8, e4, e4, e5, COMMFUSE_HIFLOAT8, COMMFUSE_INT8};
  const commfuseDataType b[] = {COMMFUSE_INT8, e4, e5, e5, COMMFUSE_HIFLOAT8, COMMFUSE_INT8};
  mm.quant = true;
  mm.a = a[form - 2];
  mm.b = b[form - 2];
  mm.out = COMMFUSE_BFLOAT16;
  mm.per_token = mm.a == COMMFUSE_INT8;
  mm.bias_present = form == 7;
  mm.bias = form == 7 && int32_bias_ok ? COMMFUSE_INT32 : COMMFUSE_FLOAT32;
  return mm;
}

bool is_commfuse_dtype(commfuseDataType t) {
  for (commfuseDataType d : kDTypes)
    if (d == t) return true;
  return false;
}

const char* decode_string(ByteReader& r, const char* usual,
                          std::initializer_list<const char*> wrong, std::string& storage) {
  const uint8_t b = r.u8();
  if (b < 0xC0) return usual;
  if (b < 0xE0 && wrong.size() > 0) return wrong.begin()[(b - 0xC0) % wrong.size()];
  if (b < 0xF0) return nullptr;
  if (b < 0xF8) return "";
  storage.assign(r.u8(), '\0');
  for (char& c : storage) c = static_cast<char>(r.u8());
  return storage.c_str();
}

const char* decode_reduce_op(ByteReader& r, std::string& storage) {
  return decode_string(r, "sum", {"max", "min", "prod", "avg", "SUM", "sum ", " sum", "su"},
                       storage);
}

}  // namespace commfuse_fuzz
