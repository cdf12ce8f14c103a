// The matmul benchmarks' float64 reference: sampled output rows recomputed from every rank's
// operands, independent of the GEMM kernels and collectives the variants under test share
// (agreeing with each other alone would not show a wrong kernel).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench_buffer.hpp"
#include "bench_check.hpp"

namespace commfuse::cli {

// Rank r's operand as the op reads it, in float64 (dequantized where the op's are
// quantized), row-major: x1 (its rows, k), x2 (k, n). Any rank can recompute any rank's.
using RankOperand = std::function<std::vector<double>(int rank)>;

// What every element of some output rows must be, and the tolerance each gets.
struct Reference {
  std::vector<int64_t> rows;  // output rows of this rank
  std::vector<double> value;  // rows.size() x n
  std::vector<double> tol;    // rows.size() x n
  double acc_tol = 0;         // the largest accumulation part of tol (check_pair)
};

// The reference of `op` (all-gather-matmul | matmul-reduce-scatter | matmul-all-reduce) at
// this rank's sampled rows: all-gather-matmul's row g is row g % m of rank g / m's x1 times
// this rank's x2; the reducing ops' rows are the sum over ranks of x1_r (m_global, k) times
// x2_r (k, n). u is the output dtype's unit roundoff.
Reference float64_reference(const std::string& op, double u, int rank, int R, int64_t m_global,
                            int64_t k, int64_t n, int64_t out_rows, const RankOperand& x1,
                            const RankOperand& x2);

// The sampled rows of `out` (dtype t, n columns) against the reference.
Check check_rows(const Bytes& out, DType t, int64_t n, const Reference& ref);

}  // namespace commfuse::cli
