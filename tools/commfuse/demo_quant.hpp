// The quantized rows of `commfuse demo` (demo_quant.cpp): QuantAllReduce, and SPEC §6's A8W8
// all_gather_matmul.
#pragma once

#include <commfuse/commfuse.hpp>

namespace commfuse::cli {

// Runs quant_all_reduce (int8, per-token-group scales, H = 1024, float32 output) on every
// rank of comm, checks it against float64, times it against the unfused composition
// (dequantize, then float32 all_reduce) and prints one row on rank 0 in cmd_demo's columns.
// Returns the number of ranks whose check failed (the same on every rank).
int demo_quant_all_reduce_row(Comm& comm);

// A8W8 all_gather_matmul (int8 x1 with per-token scales, int8 x2 with per-channel scales,
// bfloat16 output), checked against float64 (exact up to the one rounding), timed against
// its unfused composition (codes and scales all-gathered, then the same quantized GEMM).
int demo_quant_all_gather_matmul_row(Comm& comm);

}  // namespace commfuse::cli
