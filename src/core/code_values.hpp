// The fp32 value of every code of the 8-bit formats (SPEC §1: int8, hifloat8, float8_e4m3fn,
// float8_e5m2, float8_e8m0): 256 entries each, exact, built once from the bulk decoders. The
// CPU kernels look codes up in them and the CUDA kernels copy them to the device, so both
// decode every code to the same bits.
#pragma once

#include <commfuse/commfuse.hpp>

namespace commfuse {

const float* code_values(DType dtype);

}  // namespace commfuse
