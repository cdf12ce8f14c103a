#include "kernels/cuda/quant_reduce.hpp"

#include <cuda_runtime.h>

#include <cstring>

#include "core/code_values.hpp"
#include "core/error.hpp"
#include "core/narrow_float.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

constexpr int kVec = 16;  // elements per thread: one 16-byte load of codes per rank
constexpr int kThreads = 256;

enum class Out { kF32, kF16, kBF16 };

// Everything a launch needs, passed by value (__grid_constant__: no copy per thread). The
// tables are the CPU's exact ones, so every code decodes to the same fp32 bits.
struct Params {
  float lut[256];   // code -> value of x_dtype
  float e8m0[256];  // MX scale byte -> value
  const uint8_t* codes[kMaxDequantRanks];
  const uint8_t* scales[kMaxDequantRanks];
  int ranks;
  int64_t rows, h, codes_row, scales_row;
  void* out;
};

template <Out kOut>
__device__ void store16(const Params& p, int64_t at, const float (&acc)[kVec], bool vec) {
  if constexpr (kOut == Out::kF32) {
    float* o = static_cast<float*>(p.out) + at;
    if (vec) {
      for (int k = 0; k < kVec; k += 4)
        *reinterpret_cast<float4*>(o + k) = make_float4(acc[k], acc[k + 1], acc[k + 2], acc[k + 3]);
    } else {
      for (int k = 0; k < kVec; ++k) o[k] = acc[k];
    }
  } else {
    uint16_t* o = static_cast<uint16_t*>(p.out) + at;
    alignas(16) uint16_t bits[kVec];
    for (int k = 0; k < kVec; ++k) {
      const uint32_t x = __float_as_uint(acc[k]);
      // bf16: the folded encoder (the same bits as BF16::encode(x, false), narrow_float.hpp),
      // whose general form cost int8 -> bf16 41.1 against 31.5 us on an H200.
      bits[k] = static_cast<uint16_t>(kOut == Out::kBF16 ? fast::bf16_encode(x)
                                                         : fast::F16::encode(x, false));
    }
    if (vec) {
      *reinterpret_cast<uint4*>(o) = *reinterpret_cast<const uint4*>(bits);
      *reinterpret_cast<uint4*>(o + 8) = *reinterpret_cast<const uint4*>(bits + 8);
    } else {
      for (int k = 0; k < kVec; ++k) o[k] = bits[k];
    }
  }
}

// Ranks whose codes one thread loads before it decodes any: the loads of a batch are in
// flight together, and the aligned kernel is held to 64 registers (4 blocks an SM) for the
// occupancy that hides their latency. Measured on an H200 (16 Mi elements a rank, means of
// 20 launches queued back to back), against one rank at a time with every code looked up,
// in a copy of this kernel with a plain bf16 rounding:
//   int8 K-G -> bf16: R = 2 32.8 -> 26.6 us, R = 4 46.5 -> 31.6, R = 8 76.2 -> 51.9;
//   int8 K-G -> fp32: R = 2 43.4 -> 46.4 (the one loss), R = 4 52.6 -> 45.6, R = 8 79.8 -> 56.0;
//   e4m3 MX -> fp32 / bf16: within 5 % at R = 2 and 4, R = 8 bf16 82.9 -> 76.5.
// Batches of 2 or 8, and 4 elements a thread with coalesced stores, were measured too: none
// better in most cases (the coalesced form won int8 -> fp32 at R = 2 alone, 31 us).
// This kernel, bench_cuda_quant_reduce (R = 2): int8 -> fp32 47.0 us, int8 -> bf16 31.5 us,
// hifloat8 -> bf16 33.3 us, e4m3 MX -> bf16 40.9 us: 0.58 / 0.61 / 0.58 / 0.47 of a copy.
constexpr int kBatch = 4;

// One thread: 16 consecutive elements of one row (one scale group holds them: groups are 32
// or 128 long), every rank in order. __fmul_rn/__fadd_rn: never contracted into an FMA.
// kVec16: codes, K-G scales and the output are aligned for vector accesses. kInt8: the code
// is its value (the table's entry, without the shared-memory lookup).
template <Out kOut, bool kMx, bool kVec16, bool kInt8>
__global__ void __launch_bounds__(kThreads, kVec16 ? 4 : 1)
    dequant_sum_kernel(const __grid_constant__ Params p) {
  __shared__ float lut[256], e8m0[256];
  if constexpr (!kInt8) lut[threadIdx.x] = p.lut[threadIdx.x];
  if constexpr (kMx) e8m0[threadIdx.x] = p.e8m0[threadIdx.x];
  __syncthreads();
  const int64_t per_row = p.h / kVec;
  const int64_t total = p.rows * per_row;
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < total;
       v += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = v / per_row;
    const int64_t c0 = (v % per_row) * kVec;
    float acc[kVec];
    for (int r0 = 0; r0 < p.ranks; r0 += kBatch) {
      alignas(16) uint8_t b[kBatch][kVec];
      float s[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (r0 + j >= p.ranks) break;
        const uint8_t* c = p.codes[r0 + j] + row * p.codes_row + c0;
        const uint8_t* srow = p.scales[r0 + j] + row * p.scales_row;
        if constexpr (kVec16) {
          *reinterpret_cast<uint4*>(b[j]) = __ldg(reinterpret_cast<const uint4*>(c));
        } else {
          for (int k = 0; k < kVec; ++k) b[j][k] = c[k];
        }
        if constexpr (kMx) {
          s[j] = __uint_as_float(uint32_t{__ldg(srow + c0 / 32)});  // the byte; decoded below
        } else if constexpr (kVec16) {
          s[j] = __ldg(reinterpret_cast<const float*>(srow) + c0 / 128);
        } else {
          uint32_t bits = 0;
          for (int k = 0; k < 4; ++k) bits |= uint32_t{srow[c0 / 128 * 4 + k]} << (8 * k);
          s[j] = __uint_as_float(bits);
        }
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int r = r0 + j;
        if (r >= p.ranks) break;
        const float sc = kMx ? e8m0[__float_as_uint(s[j])] : s[j];
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float x = kInt8 ? static_cast<float>(static_cast<int8_t>(b[j][k])) : lut[b[j][k]];
          const float prod = __fmul_rn(x, sc);
          acc[k] = r == 0 ? prod : __fadd_rn(acc[k], prod);
        }
      }
    }
    store16<kOut>(p, row * p.h + c0, acc, kVec16);
  }
}

template <Out kOut, bool kMx, bool kVec16>
void launch_code(const Params& p, bool int8, int blocks, cudaStream_t s) {
  if constexpr (kMx)  // MX takes fp8 codes only: no int8 form is built
    dequant_sum_kernel<kOut, kMx, kVec16, false><<<blocks, kThreads, 0, s>>>(p);
  else if (int8)
    dequant_sum_kernel<kOut, kMx, kVec16, true><<<blocks, kThreads, 0, s>>>(p);
  else
    dequant_sum_kernel<kOut, kMx, kVec16, false><<<blocks, kThreads, 0, s>>>(p);
}

template <Out kOut, bool kMx>
void launch_with(const Params& p, bool vec, bool int8, int blocks, cudaStream_t s) {
  if (vec)
    launch_code<kOut, kMx, true>(p, int8, blocks, s);
  else
    launch_code<kOut, kMx, false>(p, int8, blocks, s);
}

template <Out kOut>
void launch_out(const Params& p, bool mx, bool vec, bool int8, int blocks, cudaStream_t s) {
  if (mx)
    launch_with<kOut, true>(p, vec, false, blocks, s);
  else
    launch_with<kOut, false>(p, vec, int8, blocks, s);
}

}  // namespace

void dequant_sum(const DequantSumDesc& d, void* stream) {
  const char* fn = "dequant_sum (CUDA)";
  const bool fp8 = d.x_dtype == DType::kFloat8E4M3FN || d.x_dtype == DType::kFloat8E5M2;
  CF_CHECK_ARG(fp8 || d.x_dtype == DType::kInt8 || d.x_dtype == DType::kHiFloat8, fn, ": x_dtype ",
               dtype_name(d.x_dtype), " is not int8, hifloat8, float8_e4m3fn or float8_e5m2");
  CF_CHECK_ARG(!d.mx || fp8, fn, ": MX scales take float8_e4m3fn or float8_e5m2 codes, not ",
               dtype_name(d.x_dtype));
  CF_CHECK_ARG(d.ranks >= 1 && d.ranks <= kMaxDequantRanks, fn, ": ranks=", d.ranks,
               " must be in [1, ", kMaxDequantRanks, "]");
  CF_CHECK_NOTNULL(d.codes, fn, ": codes is null");
  CF_CHECK_NOTNULL(d.scales, fn, ": scales is null");
  const int64_t group = d.mx ? 32 : 128;
  CF_CHECK_ARG(d.h > 0 && d.h % group == 0, fn, ": h=", d.h, " must be a positive multiple of ",
               group, d.mx ? " (MX)" : " (K-G)");
  CF_CHECK_ARG(d.rows >= 0, fn, ": rows=", d.rows, " is negative");
  CF_CHECK_ARG(d.codes_row_bytes >= d.h, fn, ": codes_row_bytes=", d.codes_row_bytes,
               " is below h=", d.h);
  const int64_t scale_bytes = d.h / group * (d.mx ? 1 : 4);
  CF_CHECK_ARG(d.scales_row_bytes >= scale_bytes, fn, ": scales_row_bytes=", d.scales_row_bytes,
               " is below the row's ", scale_bytes, " bytes of scales");
  CF_CHECK_ARG(d.out_dtype == DType::kFloat32 || d.out_dtype == DType::kFloat16 ||
                   d.out_dtype == DType::kBFloat16,
               fn, ": out_dtype ", dtype_name(d.out_dtype), " is not float32, float16 or bfloat16");
  CF_CHECK_NOTNULL(d.out, fn, ": out is null");
  CF_CHECK_ARG(aligned(d.out, dtype_storage_bytes(d.out_dtype, 1)), fn,
               ": out is not aligned to its ", dtype_name(d.out_dtype), " elements");
  if (d.rows == 0) return;
  require_device(fn);

  Params p{};
  std::memcpy(p.lut, code_values(d.x_dtype), sizeof p.lut);
  std::memcpy(p.e8m0, code_values(DType::kFloat8E8M0), sizeof p.e8m0);
  bool vec =
      aligned(d.out, 16) && d.codes_row_bytes % 16 == 0 && (d.mx || d.scales_row_bytes % 4 == 0);
  for (int r = 0; r < d.ranks; ++r) {
    CF_CHECK_NOTNULL(d.codes[r], fn, ": codes[", r, "] is null");
    CF_CHECK_NOTNULL(d.scales[r], fn, ": scales[", r, "] is null");
    p.codes[r] = d.codes[r];
    p.scales[r] = d.scales[r];
    vec = vec && aligned(d.codes[r], 16) && (d.mx || aligned(d.scales[r], 4));
  }
  p.ranks = d.ranks;
  p.rows = d.rows;
  p.h = d.h;
  p.codes_row = d.codes_row_bytes;
  p.scales_row = d.scales_row_bytes;
  p.out = d.out;

  const int64_t work = d.rows * (d.h / kVec);
  const int blocks = static_cast<int>(std::min<int64_t>((work + kThreads - 1) / kThreads, 65535));
  auto s = static_cast<cudaStream_t>(stream);
  const bool int8 = d.x_dtype == DType::kInt8;
  if (d.out_dtype == DType::kFloat32)
    launch_out<Out::kF32>(p, d.mx, vec, int8, blocks, s);
  else if (d.out_dtype == DType::kFloat16)
    launch_out<Out::kF16>(p, d.mx, vec, int8, blocks, s);
  else
    launch_out<Out::kBF16>(p, d.mx, vec, int8, blocks, s);
  check_launch(fn);
}

}  // namespace commfuse::kernels::cuda
