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
  // No native kernel: the direct kernel's rate (small_m_gemm.hpp) on kDirectProbeM rows, the
  // alternative to widening for up to kSmallMRows rows (0: not measured, pinned or native).
  double direct_macs_per_ns = 0;
  int probe_threads = 1;  // the compute threads the probes ran with
  std::string forced;     // COMMFUSE_HALF_GEMM when not "auto"
};

// The direct kernel's probe rows (no native kernel): mid-range of the rows it may take, past
// its 1-2-row in-register path.
inline constexpr int64_t kDirectProbeM = 16;

// Few rows: up to how many the direct kernel (small_m_gemm.hpp, b read in place) beats the
// native kernel here. oneDNN's kernels copy b into their blocked layout on every call, which
// a few rows cannot amortize: on an AMX Xeon 2x256x256 bf16 ran 5.9 us native, 3.9 us
// direct. Measured apart from HalfGemmModel, which takes 12-40 ms on the AMX Xeon, because a
// communicator's rank 0 measures it at set-up (comm_create.cpp): 4-5 ms there, 9-27 ms
// with oneDNN's first initialization, which a process's first GEMM pays anyway.
struct FewRowsModel {
  bool usable = false;       // a native kernel to beat and no COMMFUSE_HALF_GEMM pin
  int64_t direct_rows = 0;   // the direct kernel up to this many rows (0: never)
  double native_ns[4] = {};  // the probe at kFewRows rows, native
  double direct_ns[4] = {};  // and direct
};

// The model for dtype t (float16 or bfloat16): measured on first use (a 128x1024x1024 GEMM
// on each kernel, best of 3, with this process's compute threads; about 20 ms in all), unless
// COMMFUSE_HALF_GEMM pins the choice. Thread-safe. Must not be called with the matmul plan
// cache's lock held (it plans its probes through plan_matmul).
const HalfGemmModel& half_gemm_model(DType t);

// The few-rows model for dtype t: measured on first use (1, 2, 4, 8 rows of 512x512 on each
// kernel, best of 5; a few ms), not where there is no native kernel or COMMFUSE_HALF_GEMM
// pins the choice (usable false). Thread-safe; the plan cache's lock as above.
const FewRowsModel& few_rows_model(DType t);

// Whether an m x k x n GEMM of dtype t is expected faster widened: its fp32 time plus the
// widening of a, b (and c when narrow) is under 0.85x the native time (a margin so that
// measurement noise does not flip a choice between runs on a machine where the two are
// close). False where there is no native kernel (nothing to choose) or COMMFUSE_HALF_GEMM
// says native.
bool widening_pays(DType t, int64_t m, int64_t k, int64_t n, bool narrow_c);

// No native kernel for dtype t: whether the direct kernel (b read in place) is expected no
// slower on m x k x n than widening a and b for oneDNN's fp32 kernel: widening must be
// expected under 0.85x the direct time to be chosen (as widening_pays). The direct kernel
// reads every b value once per row, widening converts b once: past a few rows, the faster
// fp32 kernel repays the conversion. The break-even used to be a constant (kSmallMRows, near
// 2·16 rows on an AVX2 Intel without FMA in the loop); on an AMD EPYC Zen 4 fp16 16 x 512 x 64
// took 18.9 us direct against 12.7 widened. True where nothing was measured (pinned) and
// for a b larger than the probe's (widened to memory, not in cache as measured).
bool direct_beats_widening(DType t, int64_t m, int64_t k, int64_t n, bool narrow_c);

// Whether m rows of dtype t go to the direct kernel rather than the native one (a native
// kernel exists, the pin allows, and m <= the model's direct_rows).
bool direct_pays(DType t, int64_t m);

// Whether `calls` direct calls of m rows each are expected faster than one call of m * calls
// rows (direct or native, as the model's direct_rows says for that many), from a few-rows
// model (each count at the probe count at or above it; beyond the last, the last). False
// unless m rows take the direct kernel and calls >= 2. The direct kernel reads each b value
// once for every row of a call, so calls that could be one usually lose: with the AMX Xeon's
// 16-lane kernel, two 1-row calls of 256 x 256 took 2 x 2.1 us, one 2-row call 3.3 us. A
// pure function of the model, so that ranks deciding an algorithm from one rank's model
// decide alike.
bool direct_calls_pay(const FewRowsModel& model, int64_t m, int64_t calls);

// The row counts direct_calls_mask holds a verdict for (1..kDirectCallsRows).
inline constexpr int64_t kDirectCallsRows = 8;

// direct_calls_pay of few-rows models for float16 and bfloat16 measured now, with the
// calling thread's compute threads (not few_rows_model's, which this process may have timed
// with another thread count), at every m of 1..kDirectCallsRows, `calls` calls each, as bits
// (bit 8·d + m - 1, d 0 for float16 and 1 for bfloat16): what one rank sends its group so
// that every rank decides from the same measurement. A few ms for each dtype with a native
// kernel; the plan cache's lock as for few_rows_model.
uint32_t direct_calls_mask(int64_t calls);
// The bit of such a mask for m rows of t (false beyond kDirectCallsRows).
bool direct_calls_pay(uint32_t mask, DType t, int64_t m);

// One line for `commfuse info` / COMMFUSE_VERBOSE: the rates and the choice at a few shapes.
std::string describe_half_gemm_model(DType t);

}  // namespace commfuse::kernels::cpu
