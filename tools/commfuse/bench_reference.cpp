#include "bench_reference.hpp"

#include <algorithm>
#include <cmath>

namespace commfuse::cli {

// Tolerance per element: the output's rounding (u |ref|), the reducing ops' partials perhaps
// rounded to the output dtype before the sum (u sum_r |partial_r|), and fp32 accumulation
// over k terms (k 2^-24 sum |a b|: the worst-case bound, whatever order a kernel sums in);
// twice that for slack.
Reference float64_reference(const std::string& op, double u, int rank, int R, int64_t m_global,
                            int64_t k, int64_t n, int64_t out_rows, const RankOperand& x1_of,
                            const RankOperand& x2_of) {
  const bool agm = op == "all-gather-matmul";
  const int64_t m = m_global / R;
  Reference ref;
  ref.rows = sample_rows(out_rows, agm ? m : 0, R);
  const size_t cells = ref.rows.size() * static_cast<size_t>(n);
  std::vector<double> sum(cells, 0.0), mag(cells, 0.0), partial_abs(cells, 0.0);
  auto accumulate = [&](const std::vector<double>& x1, int64_t x1_row,
                        const std::vector<double>& x2, size_t s) {
    std::vector<double> part(static_cast<size_t>(n), 0.0), part_mag(part.size(), 0.0);
    for (int64_t i = 0; i < k; ++i) {
      const double a = x1[static_cast<size_t>(x1_row * k + i)];
      const double* b = &x2[static_cast<size_t>(i * n)];
      for (int64_t j = 0; j < n; ++j) {
        part[static_cast<size_t>(j)] += a * b[j];
        part_mag[static_cast<size_t>(j)] += std::fabs(a * b[j]);
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const size_t c = s * static_cast<size_t>(n) + static_cast<size_t>(j);
      sum[c] += part[static_cast<size_t>(j)];
      mag[c] += part_mag[static_cast<size_t>(j)];
      partial_abs[c] += std::fabs(part[static_cast<size_t>(j)]);
    }
  };
  if (agm) {
    const std::vector<double> x2 = x2_of(rank);
    std::vector<std::vector<double>> x1(static_cast<size_t>(R));
    for (size_t s = 0; s < ref.rows.size(); ++s) {
      const int owner = static_cast<int>(ref.rows[s] / m);
      auto& a = x1[static_cast<size_t>(owner)];
      if (a.empty()) a = x1_of(owner);
      accumulate(a, ref.rows[s] % m, x2, s);
    }
  } else {
    const int64_t row0 = op == "matmul-reduce-scatter" ? rank * out_rows : 0;
    for (int r = 0; r < R; ++r) {
      const std::vector<double> x1 = x1_of(r), x2 = x2_of(r);
      for (size_t s = 0; s < ref.rows.size(); ++s) accumulate(x1, row0 + ref.rows[s], x2, s);
    }
  }
  const double k_total = static_cast<double>(agm ? k : k * R);
  ref.value = sum;
  ref.tol.resize(cells);
  for (size_t c = 0; c < cells; ++c) {
    const double acc =
        2 * ((agm ? 0.0 : u * partial_abs[c]) + k_total * std::ldexp(1.0, -24) * mag[c]);
    ref.tol[c] = 2 * u * std::fabs(sum[c]) + acc;
    ref.acc_tol = std::max(ref.acc_tol, acc);
  }
  return ref;
}

Check check_rows(const Bytes& out, DType t, int64_t n, const Reference& ref) {
  const std::vector<float> got = as_float(out, t);
  Check c;
  for (size_t s = 0; s < ref.rows.size(); ++s)
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = s * static_cast<size_t>(n) + static_cast<size_t>(j);
      c.add(std::fabs(got[static_cast<size_t>(ref.rows[s] * n + j)] - ref.value[i]), ref.tol[i]);
    }
  return c;
}

}  // namespace commfuse::cli
