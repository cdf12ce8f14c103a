// The CUDA dequantize-and-sum kernel (kernels/cuda/quant_reduce.hpp) against the CPU kernel
// (kernels/cpu/dequant.hpp) bit for bit (NaN payloads excepted: a GPU returns its canonical
// NaN where x86 propagates an operand's; SPEC pins NaN-ness, not payloads): every code of every
// format (NaNs and infinities included), K-G and MX scales, 1 to 64 ranks, each output dtype,
// aligned (vector) and unaligned operands; plus the argument checks, which need no GPU.
//
// A plain program, not a GoogleTest one, so scripts/gpu-check.sh can build it on a bare GPU
// machine. Exit status: 0 passed, 1 failed, 77 skipped (no usable CUDA device: ctest's
// SKIP_RETURN_CODE, reported as skipped, never as passed). COMMFUSE_REQUIRE_GPU=1 turns
// the skip into a failure (the GPU check must not pass by skipping).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "core/error.hpp"
#include "kernels/cpu/dequant.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "kernels/cuda/runtime_info.hpp"

using commfuse::DType;
namespace cuda = commfuse::kernels::cuda;
namespace cpu = commfuse::kernels::cpu;

namespace {

using cudatest::ok;
using cudatest::status_of;

bool is_nan(uint32_t bits, DType t) {
  if (t == DType::kFloat32) return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0;
  if (t == DType::kFloat16) return (bits & 0x7C00u) == 0x7C00u && (bits & 0x3FFu) != 0;
  return (bits & 0x7F80u) == 0x7F80u && (bits & 0x7Fu) != 0;  // bfloat16
}

struct Case {
  DType x;
  bool mx;
  int ranks;
  DType out;
  int64_t rows, h;
  int64_t offset;  // bytes added to every operand pointer and row stride: 0 = aligned
};

std::string describe(const Case& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %s R=%d -> %s, %lld x %lld, offset %lld",
                commfuse::dtype_name(c.x).data(), c.mx ? "MX" : "K-G", c.ranks,
                commfuse::dtype_name(c.out).data(), static_cast<long long>(c.rows),
                static_cast<long long>(c.h), static_cast<long long>(c.offset));
  return buf;
}

void run_case(const Case& c, std::mt19937& rng) {
  const int64_t group = c.mx ? 32 : 128;
  const int64_t codes_row = c.h + c.offset;
  const int64_t scale_bytes = c.h / group * (c.mx ? 1 : 4);
  const int64_t scales_row = scale_bytes + c.offset;
  std::vector<std::vector<uint8_t>> codes(c.ranks), scales(c.ranks);
  for (int r = 0; r < c.ranks; ++r) {
    codes[r].resize(static_cast<size_t>(c.rows * codes_row + c.offset));
    // Codes 0..255 in turn from a random start, so each format's every code appears.
    const auto start = static_cast<uint32_t>(rng());
    for (size_t i = 0; i < codes[r].size(); ++i) codes[r][i] = static_cast<uint8_t>(start + i);
    scales[r].resize(static_cast<size_t>(c.rows * scales_row + c.offset));
    for (int64_t row = 0; row < c.rows; ++row)
      for (int64_t j = 0; j < c.h / group; ++j) {
        uint8_t* at = scales[r].data() + c.offset + row * scales_row;
        if (c.mx) {
          at[j] = static_cast<uint8_t>(110 + rng() % 40);  // 2^-17 .. 2^22, and NaN rarely
          if (rng() % 97 == 0) at[j] = 0xFF;
        } else {
          const float s = std::ldexp(static_cast<float>(rng() % 1000 + 1) / 1000.0f,
                                     static_cast<int>(rng() % 20) - 10);
          std::memcpy(at + 4 * j, &s, 4);
        }
      }
  }
  // CPU reference: SPEC §4's rank-order fp32 sum, rounded once.
  const size_t out_es = commfuse::dtype_storage_bytes(c.out, 1);
  const auto n = static_cast<size_t>(c.rows * c.h);
  std::vector<uint8_t> want(n * out_es), got(n * out_es, 0xA5);
  std::vector<float> acc(static_cast<size_t>(c.h));
  const auto kind = c.mx ? cpu::ScaleKind::kMx32 : cpu::ScaleKind::kGroup128;
  for (int64_t row = 0; row < c.rows; ++row) {
    for (int r = 0; r < c.ranks; ++r)
      cpu::dequant_accumulate_row(c.x, kind, codes[r].data() + c.offset + row * codes_row,
                                  scales[r].data() + c.offset + row * scales_row, c.h, acc.data(),
                                  r == 0);
    cpu::store_f32_as(acc.data(), want.data() + static_cast<size_t>(row * c.h) * out_es, c.out,
                      static_cast<size_t>(c.h));
  }
  // Device: the same bytes at the same offsets; the output offset by the case's bytes too.
  std::vector<uint8_t*> dcodes(c.ranks), dscales(c.ranks);
  std::vector<const uint8_t*> pcodes(c.ranks), pscales(c.ranks);
  for (int r = 0; r < c.ranks; ++r) {
    ok(cudaMalloc(&dcodes[r], codes[r].size()), "cudaMalloc codes");
    ok(cudaMalloc(&dscales[r], scales[r].size()), "cudaMalloc scales");
    ok(cudaMemcpy(dcodes[r], codes[r].data(), codes[r].size(), cudaMemcpyHostToDevice), "copy");
    ok(cudaMemcpy(dscales[r], scales[r].data(), scales[r].size(), cudaMemcpyHostToDevice), "copy");
    pcodes[r] = dcodes[r] + c.offset;
    pscales[r] = dscales[r] + c.offset;
  }
  uint8_t* dout = nullptr;
  ok(cudaMalloc(&dout, got.size() + 16), "cudaMalloc out");
  ok(cudaMemset(dout, 0xA5, got.size() + 16), "memset");
  cuda::DequantSumDesc d;
  d.x_dtype = c.x;
  d.mx = c.mx;
  d.ranks = c.ranks;
  d.codes = pcodes.data();
  d.scales = pscales.data();
  d.rows = c.rows;
  d.h = c.h;
  d.codes_row_bytes = codes_row;
  d.scales_row_bytes = scales_row;
  d.out_dtype = c.out;
  d.out = dout + (c.offset != 0 ? out_es : 0);  // one element off 16 bytes: the scalar path
  std::string msg;
  const auto st = status_of([&] { cuda::dequant_sum(d, nullptr); }, &msg);
  CHECK(st == commfuse::Status::kSuccess, "%s: threw %s", describe(c).c_str(), msg.c_str());
  ok(cudaDeviceSynchronize(), "kernel");
  ok(cudaMemcpy(got.data(), static_cast<uint8_t*>(d.out), got.size(), cudaMemcpyDeviceToHost),
     "copy back");
  for (size_t i = 0; i < n; ++i) {
    uint32_t g = 0, w = 0;
    std::memcpy(&g, got.data() + i * out_es, out_es);
    std::memcpy(&w, want.data() + i * out_es, out_es);
    if (g == w || (is_nan(g, c.out) && is_nan(w, c.out))) continue;
    CHECK(false, "%s: element %zu is 0x%x, the CPU kernel's 0x%x", describe(c).c_str(), i, g, w);
    break;
  }
  for (int r = 0; r < c.ranks; ++r) {
    cudaFree(dcodes[r]);
    cudaFree(dscales[r]);
  }
  cudaFree(dout);
}

// Bad descriptors are rejected before any device work, with the argument named: these run
// everywhere (the checks come before the device is needed).
void check_rejections() {
  uint8_t byte = 0;
  const uint8_t* ptrs[1] = {&byte};
  cuda::DequantSumDesc d;
  d.x_dtype = DType::kFloat8E4M3FN;
  d.ranks = 1;
  d.codes = ptrs;
  d.scales = ptrs;
  d.rows = 1;
  d.h = 128;
  d.codes_row_bytes = 128;
  d.scales_row_bytes = 4;
  float out = 0;
  d.out = &out;
  const cudatest::BadCase<cuda::DequantSumDesc> bad[] = {
      {"h not a multiple of 128", [](cuda::DequantSumDesc& x) { x.h = 100; }, "h=100"},
      {"ranks 0", [](cuda::DequantSumDesc& x) { x.ranks = 0; }, "ranks=0"},
      {"ranks 65", [](cuda::DequantSumDesc& x) { x.ranks = 65; }, "ranks=65"},
      {"MX with int8", [](cuda::DequantSumDesc& x) { x.mx = true, x.x_dtype = DType::kInt8; },
       "MX scales"},
      {"int32 codes", [](cuda::DequantSumDesc& x) { x.x_dtype = DType::kInt32; }, "x_dtype"},
      {"int8 output", [](cuda::DequantSumDesc& x) { x.out_dtype = DType::kInt8; }, "out_dtype"},
      {"short rows", [](cuda::DequantSumDesc& x) { x.codes_row_bytes = 64; }, "codes_row_bytes"},
      {"short scales", [](cuda::DequantSumDesc& x) { x.scales_row_bytes = 2; }, "scales_row_bytes"},
      {"null out", [](cuda::DequantSumDesc& x) { x.out = nullptr; }, "out is null"},
      {"misaligned out", [](cuda::DequantSumDesc& x) { x.out = static_cast<uint8_t*>(x.out) + 2; },
       "not aligned"},
  };
  cudatest::expect_rejected(d, bad,
                            [](const cuda::DequantSumDesc& x) { cuda::dequant_sum(x, nullptr); });
  // rows = 0 is a valid no-op everywhere; a real call without a device fails clearly.
  cuda::DequantSumDesc none = d;
  none.rows = 0;
  CHECK(status_of([&] { cuda::dequant_sum(none, nullptr); }) == commfuse::Status::kSuccess,
        "rows = 0 must be accepted");
  if (!cuda::device_available()) {
    std::string msg;
    const auto st = status_of([&] { cuda::dequant_sum(d, nullptr); }, &msg);
    CHECK(st == commfuse::Status::kRuntimeError, "no device: status %d, want RUNTIME_ERROR",
          static_cast<int>(st));
    CHECK(msg.find("no usable CUDA device") != std::string::npos, "no device: message '%s'",
          msg.c_str());
  }
}

}  // namespace

int main() {
  check_rejections();
  if (const int rc = cudatest::exit_without_device(); rc >= 0) return rc;
  std::mt19937 rng(2026);
  int cases = 0;
  const DType kg[] = {DType::kInt8, DType::kHiFloat8, DType::kFloat8E4M3FN, DType::kFloat8E5M2};
  const DType mx[] = {DType::kFloat8E4M3FN, DType::kFloat8E5M2};
  const DType outs[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  // 6: a second batch of the kernel's loads only partly filled; 64: kMaxDequantRanks.
  for (const int ranks : {1, 2, 3, 6, 8, 64})
    for (const DType out : outs)
      for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
        for (const DType x : kg) {
          run_case({x, false, ranks, out, 5, 384, offset}, rng);
          ++cases;
        }
        for (const DType x : mx) {
          run_case({x, true, ranks, out, 5, 192, offset}, rng);
          ++cases;
        }
      }
  // Many rows, k = 4096: a large grid.
  run_case({DType::kFloat8E4M3FN, true, 2, DType::kBFloat16, 4099, 4096, 0}, rng);
  ++cases;
  std::printf("dequant_sum: %d cases\n", cases);
  return cudatest::finish("dequant_sum vs the CPU kernel");
}
