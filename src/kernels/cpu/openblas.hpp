// OpenBLAS's sgemm as a second fp32 GEMM provider (issue 12: "pick the GEMM provider per
// dtype and machine"). Loaded at run time from libopenblas.so.0 (Debian's
// libopenblas0-pthread, which scripts/install-deps.sh installs), so that the build needs no
// BLAS headers and a machine without it simply has one provider: oneDNN. On the AVX-512
// Xeons of this project OpenBLAS 0.3.21 ran fp32 2048x4096x4096 in 351 ms against
// oneDNN 2.6.3's 406 ms (one thread each) — which is why PyTorch + gloo beat our fp32
// all_gather_matmul there.
#pragma once

#include <cstdint>
#include <string>

namespace commfuse::kernels::cpu {

// Whether OpenBLAS could be loaded; if not, why not (empty when it could).
bool openblas_available();
const std::string& openblas_unavailable();
// "OpenBLAS 0.3.21 ... (libopenblas.so.0)", for `commfuse info`; empty when unavailable.
const std::string& openblas_config();

// Row-major c (m x n, row stride ldc) = a (m x k, lda) @ b (k x n, ldb; or the (n x k)
// buffer transposed when b_transposed) (+ c when accumulate) (+ bias (n,) when non-null),
// fp32, on `threads` OpenBLAS threads (restored afterwards: OpenBLAS's count is one setting
// per process, so calls of one process are serialized). openblas_available() must hold.
void openblas_sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                    int64_t ldb, bool b_transposed, const float* bias, float* c, int64_t ldc,
                    bool accumulate, int threads);

}  // namespace commfuse::kernels::cpu
