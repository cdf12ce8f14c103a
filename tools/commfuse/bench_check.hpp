// What the benchmarks' result checks share: a count of elements outside tolerance that
// counts NaN, the dtypes' unit roundoff, and the rows a float64 reference samples.
#pragma once

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_buffer.hpp"
#include "roundoff.hpp"

namespace commfuse::cli {

inline std::vector<float> as_float(const Bytes& b, DType t) {
  const size_t count = b.size() / dtype_storage_bytes(t, 1);
  std::vector<float> v(count);
  convert(b.data(), t, v.data(), DType::kFloat32, count);
  return v;
}

// A JSON number, or null for inf/NaN (JSON has neither).
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

// What a check found: elements outside tolerance (NaN included) and the largest |difference|
// (NaN when any difference is NaN: std::max(d, NaN) would keep d and hide it).
struct Check {
  uint64_t wrong = 0;
  double max_diff = 0;
  void add(double diff, double tol) {
    wrong += !(diff <= tol);
    if (std::isnan(diff) || std::isnan(max_diff))
      max_diff = NAN;
    else
      max_diff = std::max(max_diff, diff);
  }
};

// Output rows to check against float64: the first and last, 8 spread over the output, and
// (all-gather-matmul) each rank's block's first and last row, where the fused schedule's
// pieces meet.
inline std::vector<int64_t> sample_rows(int64_t out_rows, int64_t block, int R) {
  std::vector<int64_t> rows;
  for (int i = 0; i < 8; ++i) rows.push_back(i * (out_rows - 1) / 7);
  if (block > 0)
    for (int r = 0; r < R; ++r) {
      rows.push_back(r * block);
      rows.push_back((r + 1) * block - 1);
    }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// How many elements of elem_bytes each differ bitwise between a and b (same size).
inline uint64_t differing_elements(const Bytes& a, const Bytes& b, size_t elem_bytes) {
  uint64_t n = 0;
  for (size_t i = 0; i < a.size(); i += elem_bytes)
    n += std::memcmp(a.data() + i, b.data() + i, elem_bytes) != 0;
  return n;
}

// Every element of two variants' outputs against each other: each within 2 u |x| + acc_tol
// of the true value x (acc_tol: the largest accumulation part of a float64 reference's
// tolerance over its sampled rows, standing in for every row: the inputs are alike in every
// row), so within twice that of each other.
inline Check check_pair(const Bytes& a, const Bytes& b, DType t, double acc_tol) {
  const std::vector<float> fa = as_float(a, t), fb = as_float(b, t);
  const double u = unit_roundoff(t);
  Check c;
  for (size_t i = 0; i < fa.size(); ++i) {
    const double big = std::max(std::fabs(double(fa[i])), std::fabs(double(fb[i])));
    c.add(std::fabs(double(fa[i]) - double(fb[i])), 4 * u * big + 2 * acc_tol);
  }
  return c;
}

}  // namespace commfuse::cli
