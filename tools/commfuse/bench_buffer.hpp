// The benchmarks' tensors: 64-byte aligned, as PyTorch's CPU allocator and oneDNN's memory
// give them. From std::vector (16 bytes) oneDNN's AMX int8 GEMM measured 36 % slower on its
// source (2048x4096x4096: 72 ms instead of 52), which would time the allocator, not us.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

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

}  // namespace commfuse::cli
