// One GEMM as the operators run it (ops/common/row_gemm.cpp), for the benchmarks' unfused
// composition and GEMM-alone bound: a 16-bit x2 packed once per call into the native
// kernel's layout where the operators would pack it (kernels/cpu/packed_b.hpp), read
// row-major otherwise. So fused and unfused differ in their schedule only, and the bound
// is the GEMM the operator itself runs, not a slower one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_b.hpp"

namespace commfuse::cli {

class BenchGemm {
 public:
  explicit BenchGemm(const kernels::cpu::MatmulDesc& d) : desc_(d) {
    if (d.a_dtype != DType::kFloat32 && !d.b_transposed && kernels::cpu::packing_pays(d.m))
      layout_ = kernels::cpu::layout_for(d);
    bool packed = false;
    plan_ = kernels::cpu::plan_matmul_over(d, layout_ ? &*layout_ : nullptr, &packed);
    if (packed)
      buffer_ = std::make_shared<std::vector<uint8_t>>(layout_->bytes + 64);
    else
      layout_.reset();
  }

  // c = a @ b, b row-major as desc says (packed first when this GEMM reads it packed).
  void operator()(const void* a, const void* b, void* c) const {
    if (layout_) {
      auto at = reinterpret_cast<uintptr_t>(buffer_->data());
      void* packed = reinterpret_cast<void*>((at + 63) / 64 * 64);
      kernels::cpu::pack_b(*layout_, b, desc_.k, desc_.n, desc_.ldb, packed);
      b = packed;
    }
    kernels::cpu::matmul(*plan_, a, b, nullptr, c);
  }

 private:
  kernels::cpu::MatmulDesc desc_;
  std::shared_ptr<const kernels::cpu::MatmulPlan> plan_;
  std::optional<kernels::cpu::PackedLayout> layout_;
  std::shared_ptr<std::vector<uint8_t>> buffer_;  // shared: the benchmark copies lambdas
};

}  // namespace commfuse::cli
