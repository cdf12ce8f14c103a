// Integer GEMM for the quantized operators: c (int32) = a (int8) @ b (int8), exact int32
// accumulation (SPEC §0). a is (m, k) row-major with row stride lda; b is (k, n) row-major
// or, when b_transposed, an (n, k) buffer; c is (m, n) with row stride ldc.
//
// Two implementations, chosen per descriptor from the value bounds the caller promises and
// the CPU (capped by COMMFUSE_MAX_CPU_ISA):
//  - kS8: oneDNN's s8 x s8 -> s32 matmul. With VNNI or AMX-INT8 its products accumulate in
//    int32: exact for any int8 operands. Without (AVX2, AVX-512 before VNNI) oneDNN
//    multiplies with vpmaddubsw, which adds (a + 128) * b for two k at a time into a
//    saturating int16: exact only while 2 * 255 * max|b| <= 32767, i.e. max|b| <= 64. True
//    for int4 operands (A16W4, A4W4); not for int8 weights, where it was measured to give
//    wrong sums.
//  - kMadd16: int8 x int8 where kS8 is not exact, on AVX2: b packed to int16 pairs once per
//    call (prepare_b) and multiplied with vpmaddwd, which sums in int32 (madd16_gemm.hpp).
//    Chosen where a one-time probe measured it faster than kF32Blocked (on the AMX Xeon
//    held to AVX2: 1.3-1.4x); a CPU whose vpmaddwd is slow keeps kF32Blocked.
//  - kF32Blocked: a and b widened to fp32 (b once per call by the caller, see prepare_b)
//    and multiplied by oneDNN's fp32 matmul in k-blocks short enough that every partial
//    sum is an integer below 2^24 (exact in fp32); blocks are added in int32. Exact, at
//    fp32 speed: int8 x int8 without VNNI where kMadd16 is unavailable or slower.
// COMMFUSE_VERBOSE=1 logs the choice and oneDNN's implementation per new plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace commfuse::kernels::cpu {

enum class IntMatmulPath { kS8, kMadd16, kF32Blocked };
const char* int_matmul_path_name(IntMatmulPath p);

struct IntMatmulDesc {
  int64_t m = 0, k = 0, n = 0;  // m may be 0
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool b_transposed = false;
  int a_max = 127;  // bounds on |a| and |b| the caller guarantees (e.g. 127, 8)
  int b_max = 127;
  // Tests and benchmarks: this path instead of the machine's choice. It must be exact for
  // the bounds: kS8 only where choose_int_matmul_path picks it (kF32Blocked always is;
  // kMadd16 wherever madd16_available()).
  std::optional<IntMatmulPath> force_path;
  // kS8: read b in the blocked layout oneDNN's kernel picks (format any), written once per
  // call by prepare_b (packed_b.cpp's quad loop where it knows the layout, oneDNN's reorder
  // otherwise), instead of plain b, which the brgemm kernel copies into that layout on
  // every call. One thread, AMX, 2048x4096x4096: 69.8 ms plain, 52.7 ms packed + 2.4 ms to
  // pack; 64-row calls over the same b: 118.6 ms plain, 52.7 packed. Where the kernel reads
  // plain b anyway nothing is packed.
  bool b_packed = false;
  bool operator==(const IntMatmulDesc&) const = default;
};

// The path the bounds allow: kS8 when oneDNN's int8 kernel is exact for them, else
// `exact` (kMadd16 or kF32Blocked). int32_accumulation: whether the kernel accumulates in
// int32 (VNNI / AMX).
IntMatmulPath choose_int_matmul_path(int a_max, int b_max, bool int32_accumulation,
                                     IntMatmulPath exact);
// The same for this machine: int32_accumulation = s8_gemm_accumulates_in_int32(), exact =
// exact_int_matmul_path().
IntMatmulPath choose_int_matmul_path(int a_max, int b_max);
// This machine's exact path for int8 x int8 where oneDNN's s8 kernel saturates: kMadd16
// where it is available and a one-time probe (64x1024x1024, best of 5, ~12 ms, at the
// first call) measured it faster than kF32Blocked, else kF32Blocked; COMMFUSE_INT8_GEMM=
// madd16|f32-blocked pins it (madd16 without AVX2: InvalidArgument naming the variable).
// The decision is logged at COMMFUSE_VERBOSE=1.
IntMatmulPath exact_int_matmul_path();
// Whether a product of at most `rows` rows (int8 x int8) runs the direct int8 kernel on b in
// place (kernels/cpu/small_m_int_gemm) rather than an int_matmul path: few rows
// (kSmallIntRows) where oneDNN's s8 kernel saturates, since the other exact paths prepare
// all of b first. With VNNI oneDNN's s8 kernel reads b in place too and ran 16x4096x4096 at
// W = 2 in 3.7 ms against the direct kernel's 18 ms (AVX-512 Xeon). The quantized matmul
// ops (A8W8) and alltoall_quant_matmul (A16W8) follow it.
bool direct_int8_kernel_pays(int64_t rows);
// Whether `path` reads b as prepare_b writes it whatever the plan (kMadd16, kF32Blocked):
// the callers then prepare b once per call and force the path on every chunk.
bool always_prepares_b(IntMatmulPath path);
// True when commfuse's features (capped) and oneDNN's effective ISA both have VNNI or
// AMX-INT8, and oneDNN's s8 kernel summed a saturating probe exactly (checked once).
bool s8_gemm_accumulates_in_int32();

class IntMatmulPlan;
// Validated (InvalidArgument naming the field) and cached like plan_matmul. Thread-safe.
std::shared_ptr<const IntMatmulPlan> plan_int_matmul(const IntMatmulDesc& desc);

IntMatmulPath path_of(const IntMatmulPlan& plan);
std::string describe(const IntMatmulPlan& plan);

// b as the plan's path consumes it: kS8 reads the int8 b itself (0 bytes), or with
// b_packed the int8 b in oneDNN's blocked layout; kMadd16 reads b as int16 pairs in panels
// (madd16_gemm.hpp); kF32Blocked reads b widened to fp32 in the same layout (k*n floats). prepare_b
// writes it once per call so that chunked GEMMs over the same b prepare it once.
size_t prepared_b_bytes(const IntMatmulPlan& plan);
void prepare_b(const IntMatmulPlan& plan, const int8_t* b, void* prepared);
// Whether plan reads b packed (prepared by prepare_b), and whether two plans read the same
// prepared b (a chunk's plan may only use what the full plan prepared if so).
bool reads_packed_b(const IntMatmulPlan& plan);
// Whether packing x2 for `packed` (a plan made with b_packed) pays: it reads packed b, and
// either the execute runs several GEMM calls over x2 (several_calls), or it runs one of
// `rows` rows and packed_b's own loop writes the layout (2.4 ms for 4096x4096 int8, one
// thread; one 2048x4096x4096 call on AMX: 69.8 ms plain, 52.7 ms packed), where the rule
// of 16-bit x2 applies (packing_pays: 64 rows or more). Not through oneDNN's reorder, for
// layouts packed_b does not write: 2.6 reorders into them with its generic loop, 120 ms
// for 4096x4096 into the VNNI s8 x s8 compensated layout (AMD EPYC Zen 4, one thread,
// before packed_b wrote it), where reading b packed saved about 30 ms per 2048 rows:
// alltoall_quant_matmul over TCP ran 0.64-0.76x its unfused algorithm so.
// COMMFUSE_PACK_X2 pins it.
bool int8_packing_pays(const IntMatmulPlan& packed, bool several_calls, int64_t rows);
// Callers that run their rows over packed b in several calls (to dequantize each call's
// int32 sums while they are in cache) make calls of at least this many rows where they
// have them: each call streams all of b. 2048x4096x4096 over b packed once (packing
// included), one thread, AMD EPYC Zen 4 (VNNI; commfuse_bench_int_matmul packed_blocks, two
// runs): calls of 64 rows 169-189 ms, 128 165-179, 256 160-164, one call 162-173 (plain b:
// 181-192). Inside alltoall_quant_matmul (BS 4096, H 2048, N 4096, W = 2) the fused op took
// 190-202 ms in 64-row blocks, 170-174 in 256-row ones. The AMX Xeon: 51.4 ms in 64-row
// calls, 52.4 in one.
inline constexpr int64_t kMinPackedCallRows = 256;
bool same_prepared_b(const IntMatmulPlan& a, const IntMatmulPlan& b);

// c = a @ b. b_prepared: the int8 b (kS8 reading plain b), or prepare_b's output (kS8 with
// b packed, kMadd16, kF32Blocked), with the descriptor's layout and ldb.
void int_matmul(const IntMatmulPlan& plan, const int8_t* a, const void* b_prepared, int32_t* c);

}  // namespace commfuse::kernels::cpu
