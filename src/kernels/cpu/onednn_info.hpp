// What the oneDNN in this process is and which ISA it dispatches to, and the one place
// commfuse's ISA cap (COMMFUSE_MAX_CPU_ISA) is handed to it.
#pragma once
#include <cstdint>
#include <string>
namespace commfuse::kernels::cpu {
// "2.6.3 (cpu runtime: OpenMP, hash ...)" of the oneDNN the process loaded.
std::string onednn_version();

// Caps oneDNN at commfuse's COMMFUSE_MAX_CPU_ISA (mapped to the nearest oneDNN level not
// above it) unless ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA say otherwise. Must run before
// oneDNN creates its first kernel (oneDNN fixes its ISA then): cpu_engine() calls it.
// Idempotent and thread-safe.
void apply_onednn_isa_cap();

// Bounds oneDNN's own primitive cache at kOneDnnPrimitiveCacheCapacity unless
// ONEDNN_PRIMITIVE_CACHE_CAPACITY / DNNL_PRIMITIVE_CACHE_CAPACITY say otherwise. Its default
// (1024 primitives, each keeping its JIT code) let a process that meets many shapes grow by
// tens of MiB on AVX-512 (the soak test: 31 -> 75 MiB over 5000 calls) although commfuse's
// plan caches already keep the primitives it reuses. Idempotent and thread-safe.
inline constexpr int kOneDnnPrimitiveCacheCapacity = 64;
void bound_onednn_primitive_cache();

// Whether an m x k x n GEMM stays within what oneDNN 2.x's brgemm kernels (its native
// 16-bit and s8 matmuls) handle: each dimension and each operand's element count below
// 2^31. Beyond it (shapes a fuzzer found: k = 40 Gi, n = 2^40) they allocated their
// scratchpad of m·k or k·n elements when created or divided by zero. The float plans stay
// within it by construction (matmul.hpp: kMaxCallElements, kMaxWeightElements); the int8
// plans take their exact f32-blocked path for an x2 beyond it (int_matmul.cpp).
bool fits_onednn_int32_kernels(int64_t m, int64_t k, int64_t n);

// The ISA oneDNN's kernels use now, in oneDNN's spelling ("avx2", "avx512_core_amx", ...).
std::string onednn_effective_isa();
// True when oneDNN's s8 x s8 -> s32 kernels use VNNI (vpdpbusd) or AMX, whose products
// accumulate in int32 without the int16 saturation of AVX2's vpmaddubsw.
bool onednn_int8_accumulates_in_int32();
}  // namespace commfuse::kernels::cpu
