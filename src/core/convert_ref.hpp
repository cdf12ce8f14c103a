// Scalar reference conversions: SPEC §1 written to be read, not to be fast. The bulk
// converters (convert_fast.hpp) must agree with these bit for bit; tests check that.
#pragma once

#include <cstdint>

namespace commfuse::ref {

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float x);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float x);

float e4m3fn_to_f32(uint8_t c);
uint8_t f32_to_e4m3fn(float x, bool saturate);
float e5m2_to_f32(uint8_t c);
uint8_t f32_to_e5m2(float x, bool saturate);

float hif8_to_f32(uint8_t c);
uint8_t f32_to_hif8(float x, bool saturate);

float e8m0_to_f32(uint8_t c);
uint8_t f32_to_e8m0(float x, bool saturate);

}  // namespace commfuse::ref
