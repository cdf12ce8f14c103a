// The benchmarks' tensors: 64-byte aligned, as PyTorch's CPU allocator and oneDNN's memory
// give them. From std::vector (16 bytes) oneDNN's AMX int8 GEMM measured 36 % slower on its
// source (2048x4096x4096: 72 ms instead of 52), which would time the allocator, not us.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "ops/common/call_workspace.hpp"

namespace commfuse::cli {

template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <typename U>
  bool operator==(const Aligned64<U>&) const {
    return true;
  }
};

// A byte buffer of a benchmark's tensor.
using Bytes = std::vector<uint8_t, Aligned64<uint8_t>>;

// A plan's workspace as the one-call functions get theirs (ops/common/call_workspace.hpp:
// huge pages offered from 2 MiB): where it holds x2 packed per call, the baselines' GEMM
// reads its packed copy from the same kind of memory (bench_gemm.hpp), and the unfused
// compositions' fp32 partials live in it as the fused ops' partials do (bench_fused.cpp).
class Workspace {
 public:
  void resize(size_t bytes) {
    const ops::CallWorkspace::Memory m = ops::allocate_memory(bytes);
    memory_ = std::shared_ptr<void>(m.data, [m](void*) { ops::release_memory(m); });
  }
  void* data() const { return memory_.get(); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(memory_.get());
  }

 private:
  std::shared_ptr<void> memory_;
};

}  // namespace commfuse::cli
