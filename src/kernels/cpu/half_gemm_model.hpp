// Whether a fp16/bf16 GEMM runs faster on oneDNN's native 16-bit kernel or widened to
// fp32 and multiplied by its fp32 kernel: a model of this machine, measured once per process
// and dtype (issue 12's "kernels by measurement"). Neither the ISA nor the oneDNN version
// says it: on an AVX-512 Xeon without AMX, oneDNN 2.6's avx512_core_bf16 kernel ran
// 2048x4096x4096 at half the rate of its fp32 kernel, while with AMX the native kernel is
// several times faster. Both paths accumulate in fp32 and round once (SPEC §0); they may
// differ in fp32 summation order only.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <string>

namespace commfuse::kernels::cpu {

// The row counts of the few-rows probe (direct_rows is one of them, or 0).
inline constexpr int64_t kFewRows[4] = {1, 2, 4, 8};

struct HalfGemmModel {
  bool native = false;              // oneDNN has a native kernel for this dtype here
  double native_macs_per_ns = 0;    // its rate on the probe (multiply-adds per ns)
  double f32_macs_per_ns = 0;       // the fp32 kernel's rate on the same probe
  double widen_ns_per_element = 0;  // converting one 16-bit element to fp32
  // Few rows: up to how many the direct kernel (small_m_gemm.hpp, b read in place) beats the
  // native kernel here (0: never). oneDNN's kernels copy b into their blocked layout on
  // every call, which a few rows cannot amortize: on an AMX Xeon 2x256x256 bf16 ran 5.9 us
  // native, 3.9 us direct.
  int64_t direct_rows = 0;
  double native_few_ns[4] = {};  // the few-rows probe at kFewRows rows, native
  double direct_few_ns[4] = {};  // and direct
  std::string forced;            // COMMFUSE_HALF_GEMM when not "auto"
};

// The model for dtype t (float16 or bfloat16): measured on first use (a 128x1024x1024 GEMM
// on each kernel, best of 3, then the few-rows probe: 1, 2, 4, 8 rows of 512x512, best of
// 5, each with this process's compute threads; about 20 ms in all), unless
// COMMFUSE_HALF_GEMM pins the choice. Thread-safe. Must not be called with the matmul plan
// cache's lock held (it plans its probes through plan_matmul).
const HalfGemmModel& half_gemm_model(DType t);

// Whether an m x k x n GEMM of dtype t is expected faster widened: its fp32 time plus the
// widening of a, b (and c when narrow) is under 0.85x the native time (a margin so that
// measurement noise does not flip a choice between runs on a machine where the two are
// close). False where there is no native kernel (nothing to choose) or COMMFUSE_HALF_GEMM
// says native.
bool widening_pays(DType t, int64_t m, int64_t k, int64_t n, bool narrow_c);

// Whether m rows of dtype t go to the direct kernel rather than the native one (a native
// kernel exists, the pin allows, and m <= the model's direct_rows).
bool direct_pays(DType t, int64_t m);

// Whether `calls` direct calls of m rows each are expected faster than one call of m * calls
// rows (direct or native, as direct_pays says for that many), from the few-rows probe (each
// count at the probe count at or above it; beyond the last, the last). False unless m rows
// take the direct kernel and calls >= 2. The direct kernel reads each b value once for every
// row of a call, so calls that could be one usually lose: with the AMX Xeon's 16-lane
// kernel, two 1-row calls of 256 x 256 took 2 x 2.1 us, one 2-row call 3.3 us.
bool direct_calls_pay(DType t, int64_t m, int64_t calls);

// One line for `commfuse info` / COMMFUSE_VERBOSE: the rates and the choice at a few shapes.
std::string describe_half_gemm_model(DType t);

}  // namespace commfuse::kernels::cpu
