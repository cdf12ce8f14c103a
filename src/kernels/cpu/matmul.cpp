// Matmul execution: feeds a plan's oneDNN primitive the caller's buffers, or fp32 copies of
// them when the plan widens fp16/bf16 inputs.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "core/convert_fast.hpp"
#include "core/error.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_plan.hpp"
#include "kernels/cpu/openblas.hpp"
#include "kernels/cpu/small_m_gemm.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::kernels::cpu {
namespace {

// fp32 scratch that only grows, one set per calling thread: repeated calls allocate
// nothing, and concurrent calls from different threads never share a buffer.
class Scratch {
 public:
  float* get(size_t count) {
    if (count > capacity_) {
      data_ = std::make_unique_for_overwrite<float[]>(count);
      capacity_ = count;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<float[]> data_;
  size_t capacity_ = 0;
};

struct ThreadScratch {
  Scratch a, b, c, bias;
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch s;
  return s;
}

// rows x cols elements of a 16-bit float matrix with row stride ld -> dense fp32.
void widen_rows(const void* src, DType t, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  const auto* s = static_cast<const uint16_t*>(src);
  auto widen = t == DType::kFloat16 ? fast::f16_to_f32 : fast::bf16_to_f32;
  if (ld == cols) {  // contiguous: one long vectorized loop
    widen(s, dst, static_cast<size_t>(rows * cols));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) widen(s + r * ld, dst + r * cols, static_cast<size_t>(cols));
}

// Dense fp32 rows x cols -> 16-bit float matrix with row stride ld: the single rounding.
void narrow_rows(const float* src, int64_t rows, int64_t cols, DType t, void* dst, int64_t ld) {
  auto* d = static_cast<uint16_t*>(dst);
  auto narrow = t == DType::kFloat16 ? fast::f32_to_f16 : fast::f32_to_bf16;
  if (ld == cols) {
    narrow(src, d, static_cast<size_t>(rows * cols));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) narrow(src + r * cols, d + r * ld, static_cast<size_t>(cols));
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

void run_primitive(const MatmulPlan& plan, const void* a, const void* b, const void* bias,
                   void* c) {
  const auto& args =
      thread_args({&plan, plan.serial}, {plan.a_md, a}, {plan.b_md, b}, {plan.c_md, c},
                  plan.desc.has_bias ? &plan.bias_md : nullptr, bias, plan.scratchpad_md);
  ScopedComputeThreads scoped(plan.threads);
  try {
    plan.primitive.execute(thread_stream(), args);
    thread_stream().wait();
  } catch (const dnnl::error& e) {
    detail::throw_status(Status::kRuntimeError,
                         detail::cat("matmul: oneDNN failed (", describe(plan), "): ", e.what()));
  }
}

}  // namespace

void matmul(const MatmulPlan& plan, const void* a, const void* b, const void* bias, void* c) {
  const MatmulDesc& d = plan.desc;
  if (d.m == 0) return;
  CF_CHECK_NOTNULL(a, "matmul: a is null");
  CF_CHECK_NOTNULL(b, "matmul: b is null");
  CF_CHECK_NOTNULL(c, "matmul: c is null");
  if (d.has_bias) CF_CHECK_NOTNULL(bias, "matmul: bias is null but has_bias is set");
  if (plan.chunk) {  // chunk by chunk, each a call of its own (matmul.hpp: kMaxCallElements)
    const size_t a_row = dtype_storage_bytes(d.a_dtype, static_cast<size_t>(d.lda));
    const size_t c_row = dtype_storage_bytes(d.c_dtype, static_cast<size_t>(d.ldc));
    for (int64_t r = 0; r < d.m; r += plan.chunk_rows) {
      const int64_t rows = std::min(plan.chunk_rows, d.m - r);
      MatmulDesc tail = d;
      tail.m = rows;
      tail.b_packed = false;  // chunked plans read b plain (matmul_plan.cpp)
      const auto tail_plan = rows == plan.chunk_rows ? plan.chunk : plan_matmul(tail);
      matmul(*tail_plan, static_cast<const uint8_t*>(a) + static_cast<size_t>(r) * a_row, b, bias,
             static_cast<uint8_t*>(c) + static_cast<size_t>(r) * c_row);
    }
    return;
  }
  CF_ASSERT(plan.primitive || plan.small_m || plan.openblas);
  if (plan.openblas) {  // fp32 operands and bias (matmul_plan.cpp): the caller's buffers
    openblas_sgemm(d.m, d.n, d.k, static_cast<const float*>(a), d.lda, static_cast<const float*>(b),
                   d.ldb, d.b_transposed, d.has_bias ? static_cast<const float*>(bias) : nullptr,
                   static_cast<float*>(c), d.ldc, d.accumulate, plan.threads);
    return;
  }

  ThreadScratch& s = thread_scratch();
  if (plan.bias_to_f32) {
    float* bias32 = s.bias.get(static_cast<size_t>(d.n));
    widen_rows(bias, d.bias_dtype, 1, d.n, d.n, bias32);
    bias = bias32;
  }
  if (plan.small_m) {
    small_m_gemm(d, a, b, d.has_bias ? static_cast<const float*>(bias) : nullptr, c, plan.threads);
    return;
  }
  if (!plan.widened) {
    run_primitive(plan, a, b, bias, c);
    return;
  }
  float* a32 = s.a.get(static_cast<size_t>(d.m * d.k));
  float* b32 = s.b.get(static_cast<size_t>(d.k * d.n));
  widen_rows(a, d.a_dtype, d.m, d.k, d.lda, a32);
  if (d.b_transposed)
    widen_rows(b, d.b_dtype, d.n, d.k, d.ldb, b32);
  else
    widen_rows(b, d.b_dtype, d.k, d.n, d.ldb, b32);
  if (d.c_dtype == DType::kFloat32) {
    run_primitive(plan, a32, b32, bias, c);
    return;
  }
  float* c32 = s.c.get(static_cast<size_t>(d.m * d.n));
  run_primitive(plan, a32, b32, bias, c32);
  narrow_rows(c32, d.m, d.n, d.c_dtype, c, d.ldc);
}

void matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c) {
  if (desc.m == 0) {
    validate(desc);  // an invalid call fails even when there is nothing to compute
    return;
  }
  matmul(*plan_matmul(desc), a, b, bias, c);
}

}  // namespace commfuse::kernels::cpu
