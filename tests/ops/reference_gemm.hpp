// The operator tests' float64 matmul reference.
#pragma once

#include <cmath>
#include <cstdint>

namespace optest {

// acc[i, j] += Σ_t a[i, t] · b[t, j] for row-major a (m, k) and b (k, n), each sum taken in
// t order, and abs[i, j] += Σ_t |a[i, t] · b[t, j]| when abs is given.
//
// Not instrumented by the sanitizers: checking every load of these m·R·n·k loops (every rank
// computes every rank's rows) was half of the ASan numerics tests' time, and the loops index
// only vectors their callers size. The loops run i, t, j, so b is read row by row; the sums
// are the same as in the i, j, t order.
template <typename A, typename B>
__attribute__((no_sanitize("address", "undefined"))) void reference_gemm(const A* a, const B* b,
                                                                         int64_t m, int64_t k,
                                                                         int64_t n, double* acc,
                                                                         double* abs = nullptr) {
  for (int64_t i = 0; i < m; ++i) {
    double* __restrict__ row = acc + i * n;
    double* __restrict__ row_abs = abs == nullptr ? nullptr : abs + i * n;
    for (int64_t t = 0; t < k; ++t) {
      const double x = static_cast<double>(a[i * k + t]);
      const B* __restrict__ b_row = b + t * n;
      if (row_abs == nullptr) {
        for (int64_t j = 0; j < n; ++j) row[j] += x * static_cast<double>(b_row[j]);
        continue;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double p = x * static_cast<double>(b_row[j]);
        row[j] += p;
        row_abs[j] += std::fabs(p);
      }
    }
  }
}

}  // namespace optest
