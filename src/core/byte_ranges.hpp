// Whether two byte ranges share a byte: the one overlap test of the layers that take raw
// buffers (core's convert and int4 packing, comm's in-place calls).
#pragma once

#include <cstddef>
#include <cstdint>

namespace commfuse::detail {

// Empty ranges never overlap.
inline bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes;
}

}  // namespace commfuse::detail
