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
#include "ops/common/call_workspace.hpp"

namespace commfuse::cli {

class BenchGemm {
 public:
  // prepacked_b: this b packed once here, in the layout PackedWeight would pick (the
  // --packed-x2 runs), instead of per call where packing pays.
  explicit BenchGemm(const kernels::cpu::MatmulDesc& d, const void* prepacked_b = nullptr)
      : desc_(d), prepacked_(prepacked_b != nullptr) {
    if (d.a_dtype != DType::kFloat32 && !d.b_transposed &&
        (prepacked_ || kernels::cpu::packing_pays(d.m)))
      layout_ = kernels::cpu::layout_for(d);
    bool packed = false;
    plan_ = kernels::cpu::plan_matmul_over(d, layout_ ? &*layout_ : nullptr, &packed);
    if (!packed) {
      layout_.reset();
      return;
    }
    // The operators' memory for a packed x2 (huge pages where offered), so that the
    // baselines read it as fast as the op does.
    const ops::CallWorkspace::Memory memory = ops::allocate_memory(layout_->bytes);
    buffer_ = std::shared_ptr<void>(memory.data, [memory](void*) { ops::release_memory(memory); });
    if (prepacked_) kernels::cpu::pack_b(*layout_, prepacked_b, d.k, d.n, d.ldb, packed_data());
  }

  // c = a @ b, b row-major as desc says (packed first when this GEMM reads it packed, unless
  // it was packed once at construction).
  void operator()(const void* a, const void* b, void* c) const {
    if (layout_) {
      if (!prepacked_)
        kernels::cpu::pack_b(*layout_, b, desc_.k, desc_.n, desc_.ldb, packed_data());
      b = packed_data();
    }
    kernels::cpu::matmul(*plan_, a, b, nullptr, c);
  }

 private:
  void* packed_data() const { return buffer_.get(); }

  kernels::cpu::MatmulDesc desc_;
  bool prepacked_ = false;
  std::shared_ptr<const kernels::cpu::MatmulPlan> plan_;
  std::optional<kernels::cpu::PackedLayout> layout_;
  std::shared_ptr<void> buffer_;  // shared: the benchmark copies lambdas
};

}  // namespace commfuse::cli
