// The QuantAllReduce row of `commfuse demo` (demo_quant.cpp).
#pragma once

#include <commfuse/commfuse.hpp>

namespace commfuse::cli {

// Runs quant_all_reduce (int8, per-token-group scales, H = 1024, float32 output) on every
// rank of comm, checks it against float64, times it against the unfused composition
// (dequantize, then float32 all_reduce) and prints one row on rank 0 in cmd_demo's columns.
// Returns the number of ranks whose check failed (the same on every rank).
int demo_quant_all_reduce_row(Comm& comm);

}  // namespace commfuse::cli
