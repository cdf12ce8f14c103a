// Which provider multiplies fp32 here: oneDNN or OpenBLAS (openblas.hpp), a model of this
// machine measured once per process, like half_gemm_model.hpp. Neither the ISA nor a
// version says it: OpenBLAS 0.3.21's sgemm beat oneDNN 2.6.3 by 16 % at 2048x4096x4096 on
// an AVX-512 Xeon; on other CPUs and at few rows oneDNN may win. Both accumulate in fp32;
// they differ in summation order only.
#pragma once

#include <cstdint>
#include <string>

namespace commfuse::kernels::cpu {

struct F32GemmModel {
  std::string openblas_unavailable;  // non-empty: oneDNN only, and why
  std::string forced;                // COMMFUSE_F32_GEMM when not "auto"
  // Multiply-adds per ns of each provider on the probes of the three classes of shape.
  double onednn_few = 0, openblas_few = 0;      // few rows: 32x1024x1024
  double onednn_mid = 0, openblas_mid = 0;      // 256x1024x1024
  double onednn_large = 0, openblas_large = 0;  // 2048x512x2048, measured only when needed
};

// GEMMs of at most this many rows are judged by the few-rows probe; GEMMs of at least
// kF32LargeMacs multiply-adds by the large one. Where the gap is: one thread on the AMX
// Xeon, oneDNN / OpenBLAS ran 256x1024x1024 at 169 / 154 GFLOP/s, 2048x4096x4096 at 150 /
// 176, and 2048x512x2048 (the large probe) at 143 / 169, while small probes of 2048 rows
// (2048x512x1024: 170 / 171) did not show it: it takes rows and columns both.
inline constexpr int64_t kF32FewRows = 32;
inline constexpr int64_t kF32LargeMacs = int64_t{1} << 33;

// Measured on first use with this process's compute threads (best of 3 after a warm-up):
// the few-rows and mid probes (about 10 ms), and, the first time a GEMM of the large class
// is planned, the large probe (about 150 ms, against at least 50 ms of every such GEMM) —
// unless COMMFUSE_F32_GEMM pins the choice or OpenBLAS is unavailable. Thread-safe. Must not
// be called with the matmul plan cache's lock held (it plans its probes through plan_matmul).
const F32GemmModel& f32_gemm_model(bool large = false);

// Whether an m x k x n fp32 GEMM is expected faster on OpenBLAS: its class's probe rate at
// least 1.05x oneDNN's (a margin so that noise does not flip the choice between runs where
// the two are close), or COMMFUSE_F32_GEMM=openblas.
bool openblas_pays(int64_t m, int64_t k, int64_t n);

// One line for `commfuse info` / COMMFUSE_VERBOSE: the rates and the choice.
std::string describe_f32_gemm_model();

}  // namespace commfuse::kernels::cpu
