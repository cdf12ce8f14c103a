// Bulk decoding of 8-bit codes (float8_e4m3fn, float8_e5m2, hifloat8) to the operands of a
// bf16 or fp32 GEMM: the FP8/HiF8 matmul paths (SPEC §6) decode every activation row, so
// this runs over m·k codes per call and must keep up with the GEMM, not with a table walk.
//
// Every result equals code_values(dtype)[code] bit for bit (bf16: its upper 16 bits, exact
// because these formats have at most 4 significant bits and exponents inside bf16's range).
// The vector paths, chosen from cpu::features() (so COMMFUSE_MAX_CPU_ISA caps them):
//   AVX-512BW: the 256-entry table held in 8 registers, 32 codes per 4 permutes + 3 blends;
//   AVX2+F16C (fp32 out, e4m3fn/e5m2): the code's bits placed in an fp16, widened by
//     vcvtph2ps (e4m3fn then times 2^8, exact), NaN codes taken from the table;
//   otherwise the table, one code at a time.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>

namespace commfuse::kernels::cpu {

// True for the dtypes decode_codes accepts.
bool decodable_code(DType dtype);

// dst[i] = value of src[i] (count codes of dtype) as bfloat16 bits (to_bf16) or fp32. With
// copy set, the codes are also copied there verbatim in the same pass (all_gather_matmul's
// gather_out), with non-temporal stores: read once from memory, and the copy, which this
// core does not read again, does not evict the decoded chunk the GEMM is about to read.
// (FP8 all_gather_matmul 4096x4096x64 over TCP, AMX Xeon: 0.6 ms of 7 saved against a
// memcpy of the rows before their decode.)
void decode_codes(const uint8_t* src, DType dtype, bool to_bf16, void* dst, size_t count,
                  uint8_t* copy = nullptr);

// Which path decode_codes takes for (dtype, to_bf16) here: "avx512bw", "avx2+f16c" or
// "table" (for plan descriptions and tests).
const char* decode_codes_path(DType dtype, bool to_bf16);

}  // namespace commfuse::kernels::cpu
