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
  double onednn_few = 0, openblas_few = 0;      // few rows: 32x2048x2048
  double onednn_mid = 0, openblas_mid = 0;      // 256x1024x1024
  double onednn_large = 0, openblas_large = 0;  // 1024x2048x2048, measured only when needed
};

// GEMMs of at most this many rows are judged by the few-rows probe; GEMMs of at least
// kF32LargeMacs multiply-adds by the large one. The gap depends on the shape: one thread on
// the AMX Xeon, oneDNN / OpenBLAS ran 256x1024x1024 at 169 / 154 GFLOP/s and 2048x4096x4096
// at 150 / 176, while small probes of 2048 rows (2048x512x1024: 170 / 171) did not show the
// gap: it takes deep k and wide n both (f32_gemm_model.cpp lists the probes' numbers).
inline constexpr int64_t kF32FewRows = 32;
inline constexpr int64_t kF32LargeMacs = int64_t{1} << 33;

// Measured on first use with this process's compute threads (best of 3 after a warm-up):
// the few-rows and mid probes (about 30 ms), and, the first time a GEMM of the large class
// is planned, the large probe (about 0.45 s, against at least 50 ms of every such GEMM) —
// unless COMMFUSE_F32_GEMM pins the choice or OpenBLAS is unavailable. Thread-safe. Must not
// be called with the matmul plan cache's lock held (it plans its probes through plan_matmul).
const F32GemmModel& f32_gemm_model(bool large = false);

// Whether an m x k x n fp32 GEMM on `threads` compute threads is expected faster on
// OpenBLAS: its class's probe rate at least 1.05x oneDNN's (a margin so that noise does not
// flip the choice between runs where the two are close; none for the large class, whose
// probe understates OpenBLAS's lead), or COMMFUSE_F32_GEMM=openblas.
// Only with one thread: with more, OpenBLAS's idle workers spin for a while after each call
// (and OpenMP's after oneDNN's), each library stealing the other's cores — `commfuse info`'s
// own probes with two threads measured oneDNN at a quarter of its rate after OpenBLAS ran.
bool openblas_pays(int64_t m, int64_t k, int64_t n, int threads);

// One line for `commfuse info` / COMMFUSE_VERBOSE: the rates and the choice.
std::string describe_f32_gemm_model();

}  // namespace commfuse::kernels::cpu
