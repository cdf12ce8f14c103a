// `commfuse selfcheck` (also the first part of `commfuse demo`): checks the
// number formats against SPEC §1's check values and the scalar reference, and times the
// bulk converters against the scalar reference in the same run.
#include <commfuse/commfuse.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "commands.hpp"
#include "core/convert_ref.hpp"
#include "core/float_bits.hpp"

namespace commfuse::cli {
namespace {

struct Row {
  std::string check;
  uint64_t cases = 0;
  uint64_t wrong = 0;
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The check values SPEC §1 lists for HiFloat8 and the other formats' extremes.
Row spec_values() {
  struct Case {
    DType dtype;
    float value;
    uint8_t code;
  };
  const Case cases[] = {
      {DType::kHiFloat8, 1.0f, 0x08},       {DType::kHiFloat8, 2.0f, 0x10},
      {DType::kHiFloat8, 0.5f, 0x18},       {DType::kHiFloat8, 4.0f, 0x20},
      {DType::kHiFloat8, 16.0f, 0x40},      {DType::kHiFloat8, 256.0f, 0x60},
      {DType::kHiFloat8, 0x1p-16f, 0x07},   {DType::kHiFloat8, 32768.0f, 0x6E},
      {DType::kHiFloat8, 0x1p-15f, 0x7E},   {DType::kHiFloat8, 0x1p-22f, 0x01},
      {DType::kFloat8E4M3FN, 448.0f, 0x7E}, {DType::kFloat8E5M2, 57344.0f, 0x7B},
      {DType::kFloat8E8M0, 1.0f, 0x7F},     {DType::kFloat8E8M0, 0x1p-127f, 0x00},
  };
  Row row{"SPEC §1 check values (encode and decode)", 0, 0};
  for (const auto& c : cases) {
    uint8_t code = 0;
    float back = 0;
    convert(&c.value, DType::kFloat32, &code, c.dtype, 1, false);
    convert(&c.code, c.dtype, &back, DType::kFloat32, 1, false);
    row.cases += 2;
    row.wrong += (code != c.code) + (back != c.value);
  }
  return row;
}

// Every 8-bit code decoded by the library equals the reference decoding, and re-encodes
// to itself (NaNs: to a NaN).
Row all_codes(DType dtype, float (*ref_decode)(uint8_t)) {
  Row row{std::string("all 256 codes of ") + std::string(dtype_name(dtype)), 256, 0};
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    float v = 0;
    uint8_t back = 0;
    convert(&code, dtype, &v, DType::kFloat32, 1, false);
    convert(&v, DType::kFloat32, &back, dtype, 1, false);
    const float r = ref_decode(code);
    const bool same = std::memcmp(&v, &r, 4) == 0;
    const bool nan = v != v;
    row.wrong += !same || (!nan && back != code) || (nan && ref_decode(back) == ref_decode(back));
  }
  return row;
}

struct Timing {
  std::string name;
  double bulk_gbs, ref_gbs;
  uint64_t wrong;
};

template <typename Code>
Timing time_encode(const char* name, DType dtype, Code (*ref)(float), const std::vector<float>& x) {
  std::vector<Code> bulk(x.size()), scalar(x.size());
  convert(x.data(), DType::kFloat32, bulk.data(), dtype, x.size(), false);  // warm-up
  auto t0 = Clock::now();
  convert(x.data(), DType::kFloat32, bulk.data(), dtype, x.size(), false);
  const double tb = seconds_since(t0);
  t0 = Clock::now();
  for (size_t i = 0; i < x.size(); ++i) scalar[i] = ref(x[i]);
  const double ts = seconds_since(t0);
  uint64_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) wrong += bulk[i] != scalar[i];
  const double bytes = static_cast<double>(x.size()) * 4.0;
  return {name, bytes / tb / 1e9, bytes / ts / 1e9, wrong};
}

constexpr const char* kUsage =
    "usage: commfuse selfcheck\n"
    "\n"
    "Checks the number formats: SPEC §1's check values, every code of each 8-bit format\n"
    "against the scalar reference, and the bulk converters against the reference on random\n"
    "float32 bit patterns, timing both. Exit code 0 if every check passes, 1 otherwise.\n";

uint8_t ref_e4m3(float x) {
  return ref::f32_to_e4m3fn(x, false);
}
uint8_t ref_hif8(float x) {
  return ref::f32_to_hif8(x, false);
}

}  // namespace

int cmd_selfcheck(int argc, char** argv) {
  if (const auto rc = no_options(argc, argv, kUsage)) return *rc;
  std::vector<Row> rows;
  rows.push_back(spec_values());
  rows.push_back(all_codes(DType::kFloat8E4M3FN, ref::e4m3fn_to_f32));
  rows.push_back(all_codes(DType::kFloat8E5M2, ref::e5m2_to_f32));
  rows.push_back(all_codes(DType::kHiFloat8, ref::hif8_to_f32));
  rows.push_back(all_codes(DType::kFloat8E8M0, ref::e8m0_to_f32));

  // Random fp32 bit patterns, all exponents, for the timing and a bulk-vs-reference check.
  std::mt19937 rng(12345);
  std::vector<float> x(1 << 22);
  for (auto& v : x) v = detail::f32_from_bits(static_cast<uint32_t>(rng()));
  std::vector<Timing> timings;
  timings.push_back(
      time_encode<uint16_t>("float32 -> bfloat16", DType::kBFloat16, ref::f32_to_bf16, x));
  timings.push_back(
      time_encode<uint16_t>("float32 -> float16", DType::kFloat16, ref::f32_to_f16, x));
  timings.push_back(
      time_encode<uint8_t>("float32 -> float8_e4m3fn", DType::kFloat8E4M3FN, ref_e4m3, x));
  timings.push_back(time_encode<uint8_t>("float32 -> hifloat8", DType::kHiFloat8, ref_hif8, x));

  bool ok = true;
  std::printf("%-44s %10s %8s  %s\n", "check", "cases", "#wrong", "result");
  for (const auto& r : rows) {
    ok = ok && r.wrong == 0;
    std::printf("%-44s %10llu %8llu  %s\n", r.check.c_str(),
                static_cast<unsigned long long>(r.cases), static_cast<unsigned long long>(r.wrong),
                r.wrong == 0 ? "PASS" : "FAIL");
  }
  for (const auto& t : timings) {
    ok = ok && t.wrong == 0;
    std::printf("%-44s %10zu %8llu  %s\n", ("bulk == reference, " + t.name).c_str(), x.size(),
                static_cast<unsigned long long>(t.wrong), t.wrong == 0 ? "PASS" : "FAIL");
  }
  std::printf("\n%-28s %14s %18s %8s\n", "conversion (4 Mi elements)", "bulk GB/s",
              "reference GB/s", "speedup");
  for (const auto& t : timings)
    std::printf("%-28s %14.2f %18.2f %7.1fx\n", t.name.c_str(), t.bulk_gbs, t.ref_gbs,
                t.bulk_gbs / t.ref_gbs);
  std::printf("\nselfcheck: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace commfuse::cli
