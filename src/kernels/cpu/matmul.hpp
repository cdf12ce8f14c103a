// CPU GEMM for the fused operators: c = a @ b (+ bias), accumulated in fp32 and rounded
// once to c's dtype, round-half-to-even (SPEC §0). Backed by oneDNN matmul primitives
// that are created once per descriptor and cached (DESIGN "Plan, then execute").
//
// Layout: row-major with explicit row strides, so a row block of a larger buffer (a
// peer's chunk of a gathered matrix, a slice of the output) is used in place. b may be
// given transposed: an (n, k) buffer viewed as (k, n).
//
// fp16 and bf16 go to oneDNN's native kernel where it has one and it is faster here (a
// model of the machine, measured once per process: half_gemm_model.hpp), to the direct
// few-rows kernel (small_m_gemm.hpp) for the row counts where the model found it faster
// than the native call; otherwise they are
// widened to fp32 into per-thread scratch and multiplied in fp32; the fp32 result is then
// rounded once to c's dtype, so every path computes the same thing up to fp32 summation
// order. COMMFUSE_VERBOSE=1 logs, per new plan, which implementation oneDNN chose and
// whether inputs were widened.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace commfuse::kernels::cpu {

// fp16/bf16: which kernel multiplies them (half_gemm_model.hpp).
enum class HalfPath : uint8_t {
  kAuto,     // the machine model's choice for this shape
  kNative,   // oneDNN's 16-bit kernel where it has one (else as kWidened)
  kWidened,  // widened to fp32 (or, for few rows, small_m_gemm.hpp's kernel)
};

// fp32 products: which library multiplies them (f32_gemm_model.hpp).
enum class GemmProvider : uint8_t {
  kAuto,      // the machine model's choice for this shape
  kOneDnn,    // oneDNN's fp32 matmul
  kOpenBlas,  // OpenBLAS's sgemm (openblas.hpp); PARAM_INVALID "not supported" where absent
};

// What to multiply; immutable once planned, and the plan cache's key.
struct MatmulDesc {
  int64_t m = 0;                       // rows of a and c; may be 0 (nothing to do)
  int64_t k = 0;                       // >= 1
  int64_t n = 0;                       // >= 1
  DType a_dtype = DType::kFloat32;     // float32, float16 or bfloat16
  DType b_dtype = DType::kFloat32;     // = a_dtype
  bool b_transposed = false;           // b is an (n, k) buffer with row stride ldb
  int64_t lda = 0;                     // row strides in elements: lda >= k,
  int64_t ldb = 0;                     // ldb >= (b_transposed ? k : n),
  int64_t ldc = 0;                     // ldc >= n
  DType c_dtype = DType::kFloat32;     // float32 or a_dtype
  bool has_bias = false;               // c = a @ b + bias, bias of shape (n,)
  DType bias_dtype = DType::kFloat32;  // float32 or a_dtype
  // c += a @ b (+ bias) instead of c = ...; c must be float32. For k-chunked schedules
  // that sum partial products into one fp32 accumulator.
  bool accumulate = false;
  // fp16/bf16 only: kAuto in the product; the model's probes and tests force the others.
  HalfPath half_path = HalfPath::kAuto;
  // float32 a only: kAuto in the product; the model's probes and tests force the others.
  GemmProvider provider = GemmProvider::kAuto;
  // Asks for a plan that reads b packed once by the caller (packed_b.hpp: pack_b with
  // packed_b_layout(plan)) instead of row-major with stride ldb. Honoured only by native
  // 16-bit oneDNN kernels with a layout packed_b.hpp knows, for a row-major b and one
  // oneDNN call; packed_b_layout(plan) is null where it is not, and b is then read as ldb
  // says.
  bool b_packed = false;

  bool operator==(const MatmulDesc&) const = default;
};

// The largest a (m·k) or c (m·n) one oneDNN call is given: a plan for more rows runs them in
// chunks of at most this many elements. oneDNN 2.6's brgemm kernels allocate a copy of a
// when the primitive is created, and its heuristics divide by zero for m near 2^55 (found by
// fuzzing GetWorkspaceSize); chunks of 2^26 elements (16384 rows at k = n = 4096) keep both
// away and cost no speed.
inline constexpr int64_t kMaxCallElements = int64_t{1} << 26;
// The largest b (k·n elements) a plan takes; beyond it PARAM_INVALID "not supported". oneDNN
// 2.6's kernels index the weight in 32 bits: a fuzzer's fp32 shapes with k or n past 2^31
// divided by zero inside its primitive creation, others were refused.
inline constexpr int64_t kMaxWeightElements = (int64_t{1} << 31) - 1;

// A dense descriptor: lda = k, ldb = n (k if b_transposed), ldc = n, c and bias in dtype.
MatmulDesc dense_matmul_desc(int64_t m, int64_t k, int64_t n, DType dtype,
                             bool b_transposed = false);

// Throws InvalidArgument naming the field (and its value) that is out of range.
void validate(const MatmulDesc& desc);

// A validated descriptor with its oneDNN primitive (opaque; see matmul_plan.hpp).
class MatmulPlan;

// Validates desc and returns its plan, from the cache when it was planned before with the
// same thread count (compute_threads()). Holding the pointer keeps the plan alive even if
// the cache evicts it. Thread-safe.
std::shared_ptr<const MatmulPlan> plan_matmul(const MatmulDesc& desc);

// Runs a plan. a, b, c (and bias when has_bias) must be non-null unless m == 0
// (NullPointerError naming the argument). c must not overlap a, b or bias. Thread-safe:
// several threads may run the same plan on different buffers.
void matmul(const MatmulPlan& plan, const void* a, const void* b, const void* bias, void* c);

// plan_matmul(desc) then matmul(plan, ...).
void matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c);

// The layout a plan made with b_packed reads b in, or null when it reads b row-major.
struct PackedLayout;
const PackedLayout* packed_b_layout(const MatmulPlan& plan);

// For callers that pack b once and run GEMMs of several row counts over it: the plan of d
// (b_packed ignored) that reads b packed in `layout` when one exists (*reads_packed set),
// else the plan reading b row-major. layout null: the latter.
std::shared_ptr<const MatmulPlan> plan_matmul_over(MatmulDesc d, const PackedLayout* layout,
                                                   bool* reads_packed);

// One line: shape, dtypes, oneDNN implementation, widening, threads.
std::string describe(const MatmulPlan& plan);
// True when the plan widens its fp16/bf16 inputs to fp32 before a fp32 primitive.
bool widens_inputs(const MatmulPlan& plan);

// Plans currently cached (at most kMatmulPlanCacheCapacity, least recently used evicted).
inline constexpr size_t kMatmulPlanCacheCapacity = 64;
size_t matmul_plan_cache_size();
void clear_matmul_plan_cache();

}  // namespace commfuse::kernels::cpu
