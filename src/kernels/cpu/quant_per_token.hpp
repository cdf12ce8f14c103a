// Per-token (per-row) symmetric quantization, SPEC §3 mode 7 (pertoken-dynamic) and §5
// quantize(mode="per_token"): for a row v of fp32 values and Q (127 for int8, 7 for int4)
//   amax = max |v|,  s = amax / Q  (fp32),  q = clamp(round_half_even(v * (Q / amax)), -Q, Q)
// with Q / amax computed once per row in fp32. A row with amax = 0 gives zeros and s = 0.
// NaN elements give 0 (the library's float -> integer rule); NaNs do not count towards
// amax. An infinite amax gives all zeros and s = inf.
#pragma once

#include <cstddef>
#include <cstdint>

namespace commfuse::kernels::cpu {

inline constexpr int kInt8QuantMax = 127;
inline constexpr int kInt4QuantMax = 7;

// max |v[i]| over count values (0 for count 0; NaNs are ignored).
float abs_max(const float* v, size_t count);

// Quantizes one row with a known amax (abs_max(v, count)); returns the scale amax / qmax.
// q receives count int8 values in [-qmax, qmax].
float quantize_row_with_amax(const float* v, size_t count, float amax, int qmax, int8_t* q);

// abs_max then quantize_row_with_amax.
float quantize_row_per_token(const float* v, size_t count, int qmax, int8_t* q);

// rows x cols, row-major dense: q (rows x cols int8) and scales (rows fp32).
void quantize_per_token(const float* x, int64_t rows, int64_t cols, int qmax, int8_t* q,
                        float* scales);

}  // namespace commfuse::kernels::cpu
