// Shared pieces of the operator tests: deterministic inputs, dtype encode/decode, the
// float64 references of SPEC §2 and a non-fatal EXPECT that counts failures.
#pragma once

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/scoped_env.hpp"

namespace optest {

using commfuse::DType;

inline int g_failures = 0;

#define EXPECT(cond, ...)                                                    \
  do {                                                                       \
    if (!(cond)) {                                                           \
      ++::optest::g_failures;                                                \
      std::fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                     \
      std::fprintf(stderr, "\n");                                            \
    }                                                                        \
  } while (0)

// f() must throw a commfuse::Error with status `code` whose message holds every needle (and
// `also`, when given): the rejection tests' one check.
template <typename F>
void expect_error(const char* what, commfuse::Status code,
                  std::initializer_list<const char*> needles, F&& f, const char* also = nullptr) {
  try {
    f();
    EXPECT(false, "%s: accepted", what);
  } catch (const commfuse::Error& e) {
    EXPECT(e.code() == code, "%s: status %d, expected %d: %s", what, static_cast<int>(e.code()),
           static_cast<int>(code), e.what());
    for (const char* n : needles)
      EXPECT(std::strstr(e.what(), n) != nullptr, "%s: message lacks '%s': %s", what, n, e.what());
    if (also != nullptr)
      EXPECT(std::strstr(e.what(), also) != nullptr, "%s: message lacks '%s': %s", what, also,
             e.what());
  }
}

// The algorithm COMMFUSE_ALGO=<op>:<name>[,...] forces for op ("" when none).
inline std::string forced_algo(const std::string& op) {
  const char* env = std::getenv("COMMFUSE_ALGO");
  const std::string v = env != nullptr ? env : "";
  for (size_t at = 0; at < v.size();) {
    const size_t end = std::min(v.find(',', at), v.size());
    const std::string item = v.substr(at, end - at);
    if (item.rfind(op + ":", 0) == 0) return item.substr(op.size() + 1);
    at = end + 1;
  }
  return "";
}

// Sets COMMFUSE_ALGO for a scope (plans read it when they are built), then restores it.
// Every rank must do the same, as with the variable itself.
class ScopedAlgo : public commfuse::detail::ScopedEnv {
 public:
  explicit ScopedAlgo(const std::string& value) : ScopedEnv("COMMFUSE_ALGO", value) {}
};

inline uint32_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>(z >> 32);
}

// Small integers in [-4, 4]: exact in fp16/bf16, and every fp32 partial sum of the tests'
// shapes is exact, so results can be compared bitwise with the exactly rounded reference.
// random: uniform-ish in [-1, 1).
inline std::vector<float> values(uint64_t seed, size_t count, bool random) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t h = mix(seed, i);
    v[i] = random ? static_cast<float>(h) / 2147483648.0f - 1.0f
                  : static_cast<float>(static_cast<int>(h % 9) - 4);
  }
  return v;
}

inline size_t elem_bytes(DType t) {
  return commfuse::dtype_storage_bytes(t, 1);
}

inline std::vector<uint8_t> encode(const std::vector<float>& x, DType t) {
  std::vector<uint8_t> out(commfuse::dtype_storage_bytes(t, x.size()));
  if (!x.empty()) commfuse::convert(x.data(), DType::kFloat32, out.data(), t, x.size());
  return out;
}

inline std::vector<double> decode(const std::vector<uint8_t>& b, DType t) {
  const size_t n = b.size() / elem_bytes(t);
  std::vector<float> f(n);
  if (n) commfuse::convert(b.data(), t, f.data(), DType::kFloat32, n);
  return std::vector<double>(f.begin(), f.end());
}

// The exactly representable reference (an fp32 value) rounded once to t.
inline std::vector<uint8_t> round_to(const std::vector<double>& ref, DType t) {
  std::vector<float> f(ref.begin(), ref.end());
  return encode(f, t);
}

// Unit roundoff of the output dtype (half an ulp, relative).
inline double unit_roundoff(DType t) {
  return t == DType::kFloat32   ? std::ldexp(1.0, -24)
         : t == DType::kFloat16 ? std::ldexp(1.0, -11)
                                : std::ldexp(1.0, -8);
}

}  // namespace optest
