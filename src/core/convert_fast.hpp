// Bulk conversions: integer bit manipulation with selects instead of branches, so the
// array loops in convert_fast.cpp vectorize. They agree bit for bit with convert_ref.
// They use no floating-point rounding, so FTZ/DAZ or a changed rounding mode can't
// change their results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace commfuse::fast {

// Arrays. dst and src must not overlap.
void f16_to_f32(const uint16_t* src, float* dst, size_t count);
void f32_to_f16(const float* src, uint16_t* dst, size_t count);
void bf16_to_f32(const uint16_t* src, float* dst, size_t count);
void f32_to_bf16(const float* src, uint16_t* dst, size_t count);
void e4m3fn_to_f32(const uint8_t* src, float* dst, size_t count);
void f32_to_e4m3fn(const float* src, uint8_t* dst, size_t count, bool saturate);
void e5m2_to_f32(const uint8_t* src, float* dst, size_t count);
void f32_to_e5m2(const float* src, uint8_t* dst, size_t count, bool saturate);
void hif8_to_f32(const uint8_t* src, float* dst, size_t count);
void f32_to_hif8(const float* src, uint8_t* dst, size_t count, bool saturate);
void e8m0_to_f32(const uint8_t* src, float* dst, size_t count);
void f32_to_e8m0(const float* src, uint8_t* dst, size_t count, bool saturate);

// Element versions of the encoders, for fused kernels that convert as they go.
uint16_t f32_to_f16_one(uint32_t x_bits);
uint16_t f32_to_bf16_one(uint32_t x_bits);
uint8_t f32_to_e4m3fn_one(uint32_t x_bits, bool saturate);
uint8_t f32_to_e5m2_one(uint32_t x_bits, bool saturate);
uint8_t f32_to_hif8_one(uint32_t x_bits, bool saturate);
uint8_t f32_to_e8m0_one(uint32_t x_bits, bool saturate);

}  // namespace commfuse::fast
