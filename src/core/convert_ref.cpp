// Reference conversions. Floating-point arithmetic here is done in double, where every
// fp32 input and every scaling by a power of two is exact, so rounding happens only in
// the one explicit step of each function.
#include "core/convert_ref.hpp"

#include <cmath>

#include "core/float_bits.hpp"

namespace commfuse::ref {
namespace {

using detail::f32_bits;
using detail::f32_from_bits;

// An IEEE-style binary format: sign, exp_bits exponent bits with bias, man_bits mantissa.
// has_inf: all-ones exponent means inf/NaN (fp16, bf16, e5m2). Without it (e4m3fn) only
// the all-ones code S.1111.111 is NaN and the rest of the top binade is finite.
struct Format {
  int exp_bits, man_bits, bias;
  bool has_inf;
};
constexpr Format kF16{5, 10, 15, true};
constexpr Format kBF16{8, 7, 127, true};
constexpr Format kE4M3FN{4, 3, 7, false};
constexpr Format kE5M2{5, 2, 15, true};

uint32_t code_count(Format f) {
  return 1u << (1 + f.exp_bits + f.man_bits);
}
uint32_t sign_bit(Format f) {
  return code_count(f) >> 1;
}
uint32_t exp_max(Format f) {
  return (1u << f.exp_bits) - 1;
}

// Largest finite magnitude's code (without sign).
uint32_t max_finite_code(Format f) {
  const uint32_t all_man = (1u << f.man_bits) - 1;
  if (f.has_inf) return ((exp_max(f) - 1) << f.man_bits) | all_man;
  return (exp_max(f) << f.man_bits) | (all_man - 1);
}

double decode(Format f, uint32_t code) {
  const bool neg = (code & sign_bit(f)) != 0;
  const uint32_t e = (code >> f.man_bits) & exp_max(f);
  const uint32_t m = code & ((1u << f.man_bits) - 1);
  double v;
  if (f.has_inf && e == exp_max(f)) {
    v = m == 0 ? INFINITY : NAN;
  } else if (!f.has_inf && e == exp_max(f) && m == (1u << f.man_bits) - 1) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.man_bits),
                   static_cast<int>(e) - f.bias);
  }
  return neg ? -v : v;
}

// Round-half-to-even of a non-negative double to an integer.
double round_half_even(double n) {
  const double fl = std::floor(n);
  const double diff = n - fl;
  if (diff > 0.5) return fl + 1;
  if (diff < 0.5) return fl;
  return std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1;
}

// A NaN keeps its sign and the top payload bits and is made quiet (formats with inf).
// Formats without inf (e4m3fn) have a single NaN per sign.
uint32_t encode_nan(Format f, uint32_t x_bits) {
  const uint32_t sign = (x_bits >> 31) ? sign_bit(f) : 0;
  if (!f.has_inf) return sign | (code_count(f) / 2 - 1);
  const uint32_t quiet = 1u << (f.man_bits - 1);
  const uint32_t payload = (x_bits & 0x7FFFFFu) >> (23 - f.man_bits);
  return sign | (exp_max(f) << f.man_bits) | quiet | payload;
}

uint32_t encode(Format f, float x, bool saturate) {
  const uint32_t xb = f32_bits(x);
  if (std::isnan(x)) return encode_nan(f, xb);
  const uint32_t sign = (xb >> 31) ? sign_bit(f) : 0;
  const uint32_t max_code = max_finite_code(f);
  const uint32_t overflow_code = saturate    ? max_code
                                 : f.has_inf ? (exp_max(f) << f.man_bits)
                                             : encode_nan(f, xb);
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | (overflow_code & ~sign_bit(f));
  if (a == 0.0) return sign;

  // Quantum of the binade holding a (subnormals share the smallest normal binade's).
  int exp2;
  std::frexp(a, &exp2);  // a = frac * 2^exp2, frac in [0.5, 1)
  const int e = exp2 - 1;
  const int emin = 1 - f.bias;
  const int quantum_exp = (e < emin ? emin : e) - f.man_bits;
  const double units = round_half_even(std::ldexp(a, -quantum_exp));
  const double v = std::ldexp(units, quantum_exp);
  if (v > decode(f, max_code)) return sign | (overflow_code & ~sign_bit(f));
  if (v == 0.0) return sign;

  // v is exactly representable: find its fields.
  int vexp2;
  std::frexp(v, &vexp2);
  const int ve = vexp2 - 1;
  if (ve < emin) return sign | static_cast<uint32_t>(units);  // subnormal: units = mantissa
  const double frac = std::ldexp(v, -ve) - 1.0;               // in [0, 1)
  const auto man = static_cast<uint32_t>(std::ldexp(frac, f.man_bits));
  return sign | (static_cast<uint32_t>(ve + f.bias) << f.man_bits) | man;
}

}  // namespace

float f16_to_f32(uint16_t h) {
  if (((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF) != 0)  // NaN: keep sign and payload, quiet
    return f32_from_bits((static_cast<uint32_t>(h & 0x8000) << 16) | 0x7FC00000u |
                         (static_cast<uint32_t>(h & 0x3FF) << 13));
  return static_cast<float>(decode(kF16, h));
}
uint16_t f32_to_f16(float x) {
  return static_cast<uint16_t>(encode(kF16, x, false));
}

float bf16_to_f32(uint16_t b) {
  // bf16 is the upper half of fp32: decoding is exact for every code, NaNs included.
  return f32_from_bits(static_cast<uint32_t>(b) << 16);
}
uint16_t f32_to_bf16(float x) {
  return static_cast<uint16_t>(encode(kBF16, x, false));
}

float e4m3fn_to_f32(uint8_t c) {
  return static_cast<float>(decode(kE4M3FN, c));
}
uint8_t f32_to_e4m3fn(float x, bool saturate) {
  return static_cast<uint8_t>(encode(kE4M3FN, x, saturate));
}

float e5m2_to_f32(uint8_t c) {
  if ((c & 0x7C) == 0x7C && (c & 0x03) != 0)  // NaN: keep sign and payload, quiet
    return f32_from_bits((static_cast<uint32_t>(c & 0x80) << 24) | 0x7FC00000u |
                         (static_cast<uint32_t>(c & 0x03) << 21));
  return static_cast<float>(decode(kE5M2, c));
}
uint8_t f32_to_e5m2(float x, bool saturate) {
  return static_cast<uint8_t>(encode(kE5M2, x, saturate));
}

// ---- HiFloat8 (SPEC §1 table) ----

float hif8_to_f32(uint8_t c) {
  if (c == 0x00) return 0.0f;
  if (c == 0x80) return NAN;
  const bool neg = (c & 0x80) != 0;
  if ((c & 0x7F) == 0x6F) return neg ? -INFINITY : INFINITY;
  const unsigned body = c & 0x7F;  // 7 bits after the sign
  int d, w, dot_len;
  if ((body >> 5) == 0b11) {
    d = 4;
    w = 1;
    dot_len = 2;
  } else if ((body >> 5) == 0b10) {
    d = 3;
    w = 2;
    dot_len = 2;
  } else if ((body >> 5) == 0b01) {
    d = 2;
    w = 3;
    dot_len = 2;
  } else if ((body >> 4) == 0b001) {
    d = 1;
    w = 3;
    dot_len = 3;
  } else if ((body >> 3) == 0b0001) {
    d = 0;
    w = 3;
    dot_len = 4;
  } else {  // dot 0000: denormal, M = 1..7 -> 2^(M-23)
    const double v = std::ldexp(1.0, static_cast<int>(body & 7) - 23);
    return static_cast<float>(neg ? -v : v);
  }
  const unsigned rest = body & ((1u << (7 - dot_len)) - 1);  // D exponent bits + W mantissa
  const unsigned m = rest & ((1u << w) - 1);
  int e = 0;
  if (d > 0) {
    const unsigned ebits = rest >> w;
    const bool eneg = (ebits >> (d - 1)) & 1;
    const int mag = (1 << (d - 1)) + static_cast<int>(ebits & ((1u << (d - 1)) - 1));
    e = eneg ? -mag : mag;
  }
  const double v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -w), e);
  return static_cast<float>(neg ? -v : v);
}

uint8_t f32_to_hif8(float x, bool saturate) {
  if (std::isnan(x)) return 0x80;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const uint8_t overflow = saturate ? 0x6E : 0x6F;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | overflow;
  if (a < std::ldexp(1.0, -23)) return 0x00;  // the only zero is unsigned
  int exp2;
  std::frexp(a, &exp2);
  int e = exp2 - 1;
  if (e < -15) {  // denormal band: W = 0, round half away between powers of two
    const double frac = std::ldexp(a, -e);  // [1, 2)
    if (frac >= 1.5) ++e;
    if (e < -22) e = -22;  // [2^-23, 2^-22) rounds up to 2^-22
    if (e == -15) return sign | 0x7E;
    return sign | static_cast<uint8_t>(e + 23);
  }
  const int mag = e < 0 ? -e : e;
  const int w = mag <= 3 ? 3 : mag <= 7 ? 2 : mag <= 15 ? 1 : 0;
  if (mag > 15) return sign | overflow;
  // Half away from zero at W mantissa bits; W is fixed by the exponent before rounding.
  const double scaled = std::ldexp(std::ldexp(a, -e) - 1.0, w);  // [0, 2^w)
  auto m = static_cast<unsigned>(std::floor(scaled + 0.5));
  if (m == (1u << w)) {
    m = 0;
    ++e;
  }
  if (e > 15 || (e == 15 && m != 0)) return sign | overflow;
  const int emag = e < 0 ? -e : e;
  const unsigned eneg = e < 0 ? 1 : 0;
  unsigned body;
  if (emag == 0)
    body = 0x08 | m;
  else if (emag == 1)
    body = 0x10 | (eneg << 3) | m;
  else if (emag <= 3)
    body = 0x20 | (eneg << 4) | ((emag - 2) << 3) | m;
  else if (emag <= 7)
    body = 0x40 | (eneg << 4) | ((emag - 4) << 2) | m;
  else
    body = 0x60 | (eneg << 4) | ((emag - 8) << 1) | m;
  return sign | static_cast<uint8_t>(body);
}

// ---- E8M0 (OCP MX scale): 2^(c-127), 0xFF NaN, no sign, no zero ----

float e8m0_to_f32(uint8_t c) {
  if (c == 0xFF) return NAN;
  return static_cast<float>(std::ldexp(1.0, static_cast<int>(c) - 127));
}

// Nearest power of two, ties (1.5 * 2^e) upward, as ml_dtypes does for normal inputs.
// Zero, negatives and NaN have no encoding: NaN (0xFF). Beyond 2^127: NaN, or 0xFE when
// saturating; below 2^-127: 0x00 (2^-127), the nearest code.
uint8_t f32_to_e8m0(float x, bool saturate) {
  if (std::isnan(x) || x <= 0.0f) return 0xFF;
  if (std::isinf(x)) return saturate ? 0xFE : 0xFF;
  const double a = x;
  int exp2;
  std::frexp(a, &exp2);
  int e = exp2 - 1;
  if (std::ldexp(a, -e) >= 1.5) ++e;
  if (e < -127) e = -127;
  if (e > 127) return saturate ? 0xFE : 0xFF;
  return static_cast<uint8_t>(e + 127);
}

}  // namespace commfuse::ref
