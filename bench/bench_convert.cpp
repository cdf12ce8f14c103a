// Number-format conversion throughput: the bulk converters behind commfuse::convert
// against the scalar reference functions (core/convert_ref.hpp), 1 Mi elements each.
// Bytes processed = bytes read + bytes written.
#include <benchmark/benchmark.h>
#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/convert_ref.hpp"
#include "kernels/cpu/code_decode.hpp"
#include "kernels/cpu/dequant.hpp"

namespace {

using commfuse::DType;

constexpr size_t kCount = size_t{1} << 20;

// Element loop over a reference function; encoders to fp8/HiFloat8 take a saturate flag.
template <typename Src, typename Dst, auto kFn>
void ref_loop(const void* src, void* dst, size_t count) {
  const auto* s = static_cast<const Src*>(src);
  auto* d = static_cast<Dst*>(dst);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_invocable_v<decltype(kFn), Src, bool>) {
      d[i] = kFn(s[i], false);
    } else {
      d[i] = kFn(s[i]);
    }
  }
}

using RefFn = void (*)(const void*, void*, size_t);

struct Case {
  const char* name;
  DType src, dst;
  RefFn ref;
};

const Case kCases[] = {
    {"f32_to_bf16", DType::kFloat32, DType::kBFloat16,
     ref_loop<float, uint16_t, commfuse::ref::f32_to_bf16>},
    {"f32_to_f16", DType::kFloat32, DType::kFloat16,
     ref_loop<float, uint16_t, commfuse::ref::f32_to_f16>},
    {"f32_to_e4m3fn", DType::kFloat32, DType::kFloat8E4M3FN,
     ref_loop<float, uint8_t, commfuse::ref::f32_to_e4m3fn>},
    {"f32_to_hifloat8", DType::kFloat32, DType::kHiFloat8,
     ref_loop<float, uint8_t, commfuse::ref::f32_to_hif8>},
    {"bf16_to_f32", DType::kBFloat16, DType::kFloat32,
     ref_loop<uint16_t, float, commfuse::ref::bf16_to_f32>},
    {"e4m3fn_to_f32", DType::kFloat8E4M3FN, DType::kFloat32,
     ref_loop<uint8_t, float, commfuse::ref::e4m3fn_to_f32>},
};

size_t bytes_of(DType t) {
  return commfuse::dtype_storage_bytes(t, kCount);
}

// Activation-like fp32 data (normal, sigma 4), converted to the source dtype. The same
// seed every run, so bulk and reference see the same input.
std::vector<uint8_t> make_input(DType dtype) {
  std::mt19937 rng(2024);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> f32(kCount);
  for (auto& v : f32) v = dist(rng);
  std::vector<uint8_t> out(bytes_of(dtype));
  commfuse::convert(f32.data(), DType::kFloat32, out.data(), dtype, kCount, true);
  return out;
}

void run(benchmark::State& state, const Case& c, bool bulk) {
  const std::vector<uint8_t> src = make_input(c.src);
  std::vector<uint8_t> dst(bytes_of(c.dst)), check(bytes_of(c.dst));
  // Measure only converters that agree bit for bit (the unit tests check this properly).
  commfuse::convert(src.data(), c.src, dst.data(), c.dst, kCount, false);
  c.ref(src.data(), check.data(), kCount);
  if (std::memcmp(dst.data(), check.data(), dst.size()) != 0) {
    state.SkipWithError("bulk and reference results differ");
    return;
  }
  for (auto _ : state) {
    if (bulk) {
      commfuse::convert(src.data(), c.src, dst.data(), c.dst, kCount, false);
    } else {
      c.ref(src.data(), dst.data(), kCount);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  const auto iters = static_cast<int64_t>(state.iterations());
  state.SetItemsProcessed(iters * static_cast<int64_t>(kCount));
  state.SetBytesProcessed(iters * static_cast<int64_t>(src.size() + dst.size()));
}

// The FP8/HiF8 matmul's decode of one chunk of activation codes (128 rows of k = 4096: the
// decoded chunk stays in cache, as in the operator) by decode_codes against the table walk.
void decode(benchmark::State& state, DType dtype, bool to_bf16, bool bulk) {
  constexpr size_t kChunk = 128 * 4096;
  const std::vector<uint8_t> src = make_input(dtype);
  std::vector<uint8_t> dst(kChunk * (to_bf16 ? 2 : 4));
  const float* tab = commfuse::kernels::cpu::code_values(dtype);
  size_t at = 0;
  for (auto _ : state) {
    const uint8_t* in = src.data() + at;
    if (bulk) {
      commfuse::kernels::cpu::decode_codes(in, dtype, to_bf16, dst.data(), kChunk);
    } else if (to_bf16) {
      auto* d = reinterpret_cast<uint16_t*>(dst.data());
      for (size_t i = 0; i < kChunk; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &tab[in[i]], 4);
        d[i] = static_cast<uint16_t>(bits >> 16);
      }
    } else {
      auto* d = reinterpret_cast<float*>(dst.data());
      for (size_t i = 0; i < kChunk; ++i) d[i] = tab[in[i]];
    }
    at = (at + kChunk) % kCount;  // fresh source each time, as received rows are
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kChunk));
  state.SetLabel(bulk ? commfuse::kernels::cpu::decode_codes_path(dtype, to_bf16) : "table");
}

}  // namespace

int main(int argc, char** argv) {
  for (const Case& c : kCases) {
    for (const bool bulk : {true, false}) {
      const std::string name = std::string("convert/") + c.name + (bulk ? "/bulk" : "/ref");
      benchmark::RegisterBenchmark(name.c_str(), [&c, bulk](benchmark::State& s) {
        run(s, c, bulk);
      })->Unit(benchmark::kMicrosecond);
    }
  }
  for (const DType t : {DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kHiFloat8}) {
    for (const bool to_bf16 : {true, false}) {
      for (const bool bulk : {true, false}) {
        const std::string name = "decode/" + std::string(commfuse::dtype_name(t)) +
                                 (to_bf16 ? "/bf16" : "/f32") + (bulk ? "/bulk" : "/ref");
        benchmark::RegisterBenchmark(name.c_str(), [t, to_bf16, bulk](benchmark::State& s) {
          decode(s, t, to_bf16, bulk);
        })->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
