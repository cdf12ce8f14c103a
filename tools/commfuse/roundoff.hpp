// The unit roundoff u of the float formats the CLI's checks compare in (2^-24 float32, 2^-11
// float16, 2^-8 bfloat16): a result rounded once to the format is within u |x| of x. One
// definition for the demo's bounds and the benchmarks' result checks.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cmath>

namespace commfuse::cli {

inline double unit_roundoff(DType t) {
  return t == DType::kFloat16    ? std::ldexp(1.0, -11)
         : t == DType::kBFloat16 ? std::ldexp(1.0, -8)
                                 : std::ldexp(1.0, -24);
}

}  // namespace commfuse::cli
