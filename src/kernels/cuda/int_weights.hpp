// alltoall_quant_matmul's x2 in the one layout cuBLASLt's int8 GEMM takes: (n, k) int8,
// dense (its "TN" form). The operator accepts x2 as (k, n) or transposed (n, k), int8 or
// int4 (SPEC §1: two per byte, element 2j in the low nibble); int4 values are widened to
// int8, which is exact: the int8 x int8 -> int32 product of int4-range values is the int4
// product (SPEC §3's A16W4 / A4W4 accumulate exactly in int32, as the CPU kernels do). A
// (k, n) x2 is transposed through shared-memory tiles, so reads and writes both coalesce.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>

namespace commfuse::kernels::cuda {

// Also SPEC §6's A8W8 / FP8 x2 given as (k, n): any 1-byte code moves as int8 (a byte transpose).
struct WeightsTnDesc {
  DType src_dtype = DType::kInt8;  // int8 (any 1-byte code) or int4
  bool src_transposed = false;     // src stored (n, k); else (k, n)
  int64_t k = 0, n = 0;            // int4: the stored rows' length (k or n) even
  const void* src = nullptr;       // device
  int64_t ld_src = 0;              // elements between stored rows; 0: dense (int4: even)
  int8_t* dst = nullptr;           // device, (n, k) dense
};

// Launches on `stream` (cudaStream_t). Throws PARAM_INVALID naming the argument, or
// RUNTIME_ERROR for a CUDA failure or no device.
void weights_to_tn(const WeightsTnDesc& d, void* stream);

}  // namespace commfuse::kernels::cuda
