// The operators on the GPU (SPEC §2-4: the three matmul ops, the quantized reductions, the
// alltoall ops), over a communicator's DeviceContext. Every call is queued on the caller's stream
// and returns once queued (as cuBLAS and NCCL calls do; except a call that grows the heap or the
// scratch, which waits for this rank's queued work first); the host takes part in the one barrier
// that orders the ranks' publishes before their reads.
//
// all_gather_matmul: x1 is copied into this rank's half of the symmetric heap; the GEMM runs
// on the local rows first (they need no wait), then on each peer's rows read in place from
// its heap as its kReady fires, peers in rotated order (rank + 1 first) so the ranks do not
// all read one peer at once; gather_out is filled by the copy stream alongside the GEMMs.
// The reducing ops put their fp32 partial product into the heap and sum the partials of
// their rows in rank order (rows of their block for reduce_scatter, all rows for
// all_reduce), the bias added once, one rounding: the CPU path's order of operations, so
// every rank of matmul_all_reduce gets the same bits.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <string>

#include "ops/cuda/device_context.hpp"

namespace commfuse::ops::cuda {

// The operands, validated (device pointers, dense row-major unless said).
struct DeviceMatmul {
  DType dtype = DType::kBFloat16;  // x1 and x2: float32, float16 or bfloat16 (quantized below)
  int64_t m = 0, k = 0, n = 0;     // x1 is (m, k) on this rank
  const void* x1 = nullptr;
  const void* x2 = nullptr;  // (k, n) with row stride ld_x2, or transposed: (n, k) stored
  int64_t ld_x2 = 0;
  bool x2_transposed = false;
  const void* bias = nullptr;  // (n,) or null (float; an int32 A8W8 bias is bias_int)
  DType bias_dtype = DType::kFloat32;
  void* out = nullptr;  // dtype (quantized: out_dtype); shape per op
  // SPEC §6 quantized mode (dtype int8: A8W8; float8_e4m3fn / e5m2: FP8; hifloat8: HiF8):
  // x2 of b_dtype, plain or transposed (A8W8 / FP8 given as (k, n) are transposed in scratch
  // for cuBLASLt's TN-only int8 / fp8 GEMMs; HiF8's codes are widened to bf16 for a bf16
  // GEMM); y = f32(x1 @ x2) *
  // (x1_scale[i] * x2_scale[j]) (+ bias), kernels/cuda/epilogue.hpp's quant_epilogue.
  bool quantized = false;
  DType b_dtype = DType::kInt8;
  DType out_dtype = DType::kBFloat16;  // float32, float16 or bfloat16
  const float* x1_scale = nullptr;     // null: 1
  bool x1_per_token = false;           // m values, else one
  const float* x2_scale = nullptr;
  bool x2_per_channel = false;        // n values, else one
  const int32_t* bias_int = nullptr;  // A8W8 all_gather_matmul: joins the int32 sum
};

// out (m·R, n) = gather_out @ x2 + bias; gather_out (m·R, k) or null.
void all_gather_matmul(DeviceContext& ctx, const DeviceMatmul& a, void* gather_out, void* stream);
// reduce_scatter (all_reduce false): out (m/R, n) = rank's rows of Σ_s x1_s @ x2_s, + bias;
// all_reduce: out (m, n), all rows.
void matmul_reduce(DeviceContext& ctx, const DeviceMatmul& a, bool all_reduce, void* stream);

// quant_all_reduce / quant_reduce_scatter (SPEC §4): x's codes and scales are copied into
// this rank's half, and each rank dequantizes and sums its rows of every rank's block in
// place, in rank order (kernels/cuda/quant_reduce.hpp: the CPU kernel's bits).
struct DeviceQuantReduce {
  DType x_dtype = DType::kInt8;  // int8, hifloat8, float8_e4m3fn, float8_e5m2
  bool mx = false;               // E8M0 per 32 (else fp32 per 128)
  int64_t rows = 0, h = 0;       // x (rows, h), dense
  const void* x = nullptr;
  const void* scales = nullptr;  // rows × scale_row_bytes, dense
  int64_t scale_row_bytes = 0;
  DType out_dtype = DType::kFloat32;
  void* out = nullptr;  // all_reduce: (rows, h); reduce_scatter: (rows/R, h)
};
void quant_reduce(DeviceContext& ctx, const DeviceQuantReduce& a, bool all_reduce, void* stream);

// alltoall_matmul / alltoall_quant_matmul (SPEC §3): x1 is copied into this rank's half
// (A4W4: with its token scales after it); this rank's permuted rows (BS/R, R*H) are read in
// place from every rank's block for it — copied (alltoall_matmul) into all_to_all_out or
// scratch and multiplied; or, A16W8 / A16W4, quantized per token in the same pass
// (kernels/cuda/permute_quant: the CPU kernel's codes and scales, Q = 127 / 7), multiplied in
// int8 -> int32 and dequantized (token_epilogue: the CPU's bits); or, A4W4, widened to int8
// with each segment's token scale, one GEMM per source segment and their dequantized
// products summed in rank order. The quantized GEMMs take x2 as (N, R*H) int8: any other x2
// (int4, or not transposed) is first converted into that form in scratch, once per call
// (kernels/cuda/int_weights: exact).
struct DeviceAlltoAll {
  DType x1_dtype = DType::kBFloat16;  // float16, bfloat16; int4 (A4W4); float32 unquantized
  int64_t bs = 0, h = 0, n = 0;       // x1 (bs, h) on every rank
  const void* x1 = nullptr;
  const void* x2 = nullptr;  // (R*h, n), or transposed: (n, R*h) stored; dense
  bool x2_transposed = false;
  const void* bias = nullptr;  // (n,) or null
  DType bias_dtype = DType::kFloat32;
  DType out_dtype = DType::kBFloat16;  // x1's, or A4W4's float16 / bfloat16
  void* out = nullptr;                 // (bs/R, n)
  void* all_to_all_out = nullptr;      // (bs/R, R*h) of x1's dtype, or null
  // alltoall_quant_matmul: x2 of b_dtype (int8: A16W8; int4: A16W4 and A4W4), x2_scale (n,),
  // the optional smooth scale (R*h,) of x1's dtype (A16), A4W4's token scales (bs,).
  bool quantized = false;
  DType b_dtype = DType::kInt8;
  const float* x2_scale = nullptr;
  const void* smooth = nullptr;
  const float* token_scale = nullptr;
};
void alltoall_matmul(DeviceContext& ctx, const DeviceAlltoAll& a, void* stream);

// Empty when every GEMM the schedule will issue is one cuBLASLt takes on this device; else
// why not — for the plans, which must refuse a call before it starts (a GEMM refused after
// the ranks synchronized would abort the communicator).
std::string matmul_gemm_unsupported(const DeviceMatmul& a);
std::string alltoall_gemm_unsupported(const DeviceAlltoAll& a, int ranks);

}  // namespace commfuse::ops::cuda
