// Soak (issue 14): COMMFUSE_SOAK_OPS (default 1000) mixed calls — every operator and
// collective, random small shapes and dtypes, now and then a bad argument on one rank or on
// all — checking sampled results against exact references (small-integer inputs, so every
// sum and product is exact in float32, float16 and bfloat16), and that memory and /dev/shm
// stay flat (RSS over the second half of the calls; no /dev/shm entry left). Every rank draws the
// same sequence from the same seed, so they make the same calls. Rank 0 prints one summary line;
// `make soak` runs 10^5 calls at W = 4.
#include <dirent.h>
#include <unistd.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "numerics.hpp"

namespace optest {
namespace {

using commfuse::TensorView;

// Resident set of this process (kB), from /proc/self/statm.
long rss_kb() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// The /dev/shm/commfuse-* names present now, sorted.
std::vector<std::string> shm_entries() {
  std::vector<std::string> names;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return names;
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, "commfuse-", 9) == 0) names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The names in `now` but not in `before` that are still there after up to 10 s. Tests that
// ctest runs beside this one create segments too, each for the moments until all their ranks
// mapped it (then it is unlinked; under load that can take seconds); one that this job leaked
// stays, since nothing of ours will unlink it any more.
std::vector<std::string> shm_leaked(const std::vector<std::string>& before,
                                    std::vector<std::string> now) {
  std::vector<std::string> leaked;
  std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                      std::back_inserter(leaked));
  for (int waited_ms = 0; !leaked.empty() && waited_ms < 10000; waited_ms += 100) {
    usleep(100 * 1000);
    now = shm_entries();
    std::vector<std::string> still;
    std::set_intersection(leaked.begin(), leaked.end(), now.begin(), now.end(),
                          std::back_inserter(still));
    leaked = std::move(still);
  }
  return leaked;
}

// Rank r's input element i of call `call`: a small integer in [-2, 2].
float input(uint64_t call, int r, size_t i, int salt) {
  return static_cast<float>(static_cast<int>(mix(call * 131 + salt, i * 17 + r) % 5) - 2);
}

std::vector<uint8_t> inputs(uint64_t call, int r, size_t n, DType t, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(call, r, i, salt);
  return encode(v, t);
}

struct Soak {
  commfuse::Comm& comm;
  int R, me;
  std::mt19937_64 rng{20261201};
  long calls = 0, rejected = 0, checked = 0;

  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }

  // Runs one call; `bad` = -1 (none), R (every rank) or the rank that passes a bad argument.
  // f(bad_here) makes the call; returns true when it succeeded (then the caller checks).
  template <typename F>
  bool run(const char* what, int bad, F&& f) {
    ++calls;
    const bool bad_here = bad == R || bad == me;
    try {
      f(bad_here);
    } catch (const commfuse::RuntimeFailure& e) {
      EXPECT(bad >= 0 && !bad_here && std::strstr(e.what(), "rejected") != nullptr,
             "call %ld (%s): unexpected RuntimeFailure: %s", calls, what, e.what());
      ++rejected;
      return false;
    } catch (const commfuse::Error& e) {
      EXPECT(bad_here, "call %ld (%s): unexpected error: %s", calls, what, e.what());
      ++rejected;
      return false;
    }
    EXPECT(bad < 0, "call %ld (%s): a call with a bad argument (rank %d) succeeded", calls, what,
           bad);
    return bad < 0;
  }

  void expect_equal(const char* what, const std::vector<uint8_t>& got,
                    const std::vector<double>& ref, DType t) {
    ++checked;
    const std::vector<uint8_t> want = round_to(ref, t);
    EXPECT(std::memcmp(got.data(), want.data(), want.size()) == 0,
           "call %ld (%s, %s): result differs from the reference", calls, what,
           std::string(commfuse::dtype_name(t)).c_str());
  }

  void collective(uint64_t call, int bad, bool check) {
    const DType t = std::array{DType::kFloat32, DType::kFloat16, DType::kBFloat16}[pick(0, 2)];
    const size_t n = static_cast<size_t>(pick(1, 3000));
    const int kind = static_cast<int>(pick(0, 3));
    const size_t es = elem_bytes(t);
    std::vector<uint8_t> src = inputs(call, me, n * R, t, 1), dst(n * R * es, 0xCD);
    const void* s = src.data();
    const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};
    if (!run(names[kind], bad,
             [&](bool b) {
               const void* sp = b ? nullptr : s;
               if (kind == 0) comm.all_reduce(sp, dst.data(), n, t);
               if (kind == 1) comm.all_gather(sp, dst.data(), n, t);
               if (kind == 2) comm.reduce_scatter(sp, dst.data(), n, t);
               if (kind == 3) comm.all_to_all(sp, dst.data(), n, t);
             }) ||
        !check)
      return;
    std::vector<double> ref(kind == 0 || kind == 2 ? n : n * R, 0.0);
    for (size_t i = 0; i < ref.size(); ++i)
      for (int q = 0; q < R; ++q) {
        if (kind == 0) ref[i] += input(call, q, i, 1);
        if (kind == 2) ref[i] += input(call, q, me * n + i, 1);
        if (kind == 1 && static_cast<int>(i / n) == q) ref[i] = input(call, q, i % n, 1);
        if (kind == 3 && static_cast<int>(i / n) == q) ref[i] = input(call, q, me * n + i % n, 1);
      }
    dst.resize(ref.size() * es);
    expect_equal(names[kind], dst, ref, t);
  }

  // x1 (m, k) of rank q times x2 (k, n) of rank q; k <= 16 keeps every sum exact.
  void matmul(uint64_t call, int bad, bool check) {
    const DType t = std::array{DType::kFloat32, DType::kFloat16, DType::kBFloat16}[pick(0, 2)];
    const int kind = static_cast<int>(pick(0, 2));
    const int64_t m = R * pick(1, 6), k = pick(1, 16), n = pick(1, 24);
    const std::vector<uint8_t> x1 = inputs(call, me, m * k, t, 2),
                               x2 = inputs(call, me, k * n, t, 3);
    const int64_t out_rows = kind == 0 ? m * R : kind == 1 ? m / R : m;
    std::vector<uint8_t> out(out_rows * n * elem_bytes(t), 0xCD);
    const std::string g = comm.name();
    const char* names[] = {"all_gather_matmul", "matmul_reduce_scatter", "matmul_all_reduce"};
    if (!run(names[kind], bad,
             [&](bool b) {
               const TensorView a(x1.data(), t, {m, k}), w(x2.data(), t, {b ? k + 1 : k, n});
               const TensorView o(out.data(), t, {out_rows, n});
               commfuse::AllGatherMatmulOptions no_gather;
               no_gather.gather_output = false;
               if (kind == 0) commfuse::all_gather_matmul(a, w, g, R, o, TensorView(), no_gather);
               if (kind == 1) commfuse::matmul_reduce_scatter(a, w, g, R, o);
               if (kind == 2) commfuse::matmul_all_reduce(a, w, g, o);
             }) ||
        !check)
      return;
    std::vector<double> ref(out_rows * n, 0.0);
    auto dot = [&](int xq, int64_t row, int wq, int64_t col) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j)
        s += double{input(call, xq, row * k + j, 2)} * input(call, wq, j * n + col, 3);
      return s;
    };
    for (int64_t i = 0; i < out_rows; ++i)
      for (int64_t c = 0; c < n; ++c) {
        double& v = ref[i * n + c];
        if (kind == 0) v = dot(static_cast<int>(i / m), i % m, me, c);  // gathered rows @ my x2
        if (kind == 1)
          for (int q = 0; q < R; ++q) v += dot(q, me * (m / R) + i, q, c);
        if (kind == 2)
          for (int q = 0; q < R; ++q) v += dot(q, i, q, c);
      }
    expect_equal(names[kind], out, ref, t);
  }

  // int8 codes with scale 1 per 128-column group: the dequantized sum is the codes' sum.
  void quant(uint64_t call, int bad, bool check) {
    const bool rs = pick(0, 1) == 1;
    const int64_t bs = R * pick(1, 4), h = 128 * pick(1, 2);
    const std::vector<uint8_t> x = inputs(call, me, bs * h, DType::kInt8, 4);
    const std::vector<float> scales(bs * (h / 128), 1.0f);
    const int64_t rows = rs ? bs / R : bs;
    std::vector<float> out(rows * h, -7.0f);
    const char* name = rs ? "quant_reduce_scatter" : "quant_all_reduce";
    if (!run(name, bad,
             [&](bool b) {
               const TensorView xv(x.data(), DType::kInt8, {bs, h});
               const TensorView sv(scales.data(), DType::kFloat32, {b ? bs - 1 : bs, h / 128});
               const TensorView ov(out.data(), DType::kFloat32, {rows, h});
               if (rs)
                 commfuse::quant_reduce_scatter(xv, sv, comm.name(), ov);
               else
                 commfuse::quant_all_reduce(xv, sv, comm.name(), ov);
             }) ||
        !check)
      return;
    std::vector<double> ref(rows * h, 0.0);
    for (int64_t i = 0; i < rows * h; ++i)
      for (int q = 0; q < R; ++q) ref[i] += input(call, q, (rs ? me * rows * h : 0) + i, 4);
    std::vector<uint8_t> got(out.size() * 4);
    std::memcpy(got.data(), out.data(), got.size());
    expect_equal(name, got, ref, DType::kFloat32);
  }

  // The all-to-all operators: quantized results are not exact, so only that they succeed
  // (or fail as expected) and produce finite values.
  void alltoall(uint64_t call, int bad) {
    const bool quantized = pick(0, 1) == 1;
    const int64_t bs = R * pick(1, 4), h = 8 * pick(1, 2), n = pick(1, 16);
    const std::vector<uint8_t> x1 = inputs(call, me, bs * h, DType::kFloat16, 5);
    const std::vector<uint8_t> x2 =
        inputs(call, me, R * h * n, quantized ? DType::kInt8 : DType::kFloat16, 6);
    const std::vector<float> scale(n, 0.5f);
    std::vector<uint8_t> out(bs / R * n * 2, 0xCD);
    const char* name = quantized ? "alltoall_quant_matmul" : "alltoall_matmul";
    if (!run(name, bad, [&](bool b) {
          const TensorView a(x1.data(), DType::kFloat16, {bs, h});
          const TensorView w(x2.data(), quantized ? DType::kInt8 : DType::kFloat16,
                             {R * h + (b ? 1 : 0), n});
          const TensorView o(out.data(), DType::kFloat16, {bs / R, n});
          if (quantized)
            commfuse::alltoall_quant_matmul(a, w, TensorView(scale.data(), DType::kFloat32, {n}),
                                            comm.name(), o);
          else
            commfuse::alltoall_matmul(a, w, comm.name(), o);
        }))
      return;
    ++checked;
    const std::vector<double> v = decode(out, DType::kFloat16);
    for (double d : v) EXPECT(std::isfinite(d), "call %ld (%s): non-finite output", calls, name);
  }
};

}  // namespace

int case_soak(commfuse::Comm& comm) {
  const char* env = std::getenv("COMMFUSE_SOAK_OPS");
  const long total = env != nullptr ? std::atol(env) : 1000;
  Soak s{comm, comm.world_size(), comm.rank()};
  const std::vector<std::string> shm_before = shm_entries();
  long rss_start = 0;
  // Buffers and caches reach their size in the first half: the plan caches hold 64 float and
  // 32 integer GEMM plans, each with its JIT code (larger on AVX-512), and random shapes fill
  // them within a few thousand calls (tests/ops/CMakeLists.txt: the short soak's count).
  const long warmup = total / 2;
  for (long i = 0; i < total; ++i) {
    if (i == warmup) rss_start = rss_kb();
    // One call in 40 has a bad argument: on every rank, or on one chosen rank.
    const int bad = s.pick(0, 39) == 0 ? static_cast<int>(s.pick(0, s.R)) : -1;
    const bool check = i % 10 == 0;
    const auto call = static_cast<uint64_t>(i);
    switch (s.pick(0, 3)) {
      case 0:
        s.collective(call, bad, check);
        break;
      case 1:
        s.matmul(call, bad, check);
        break;
      case 2:
        s.quant(call, bad, check);
        break;
      default:
        s.alltoall(call, bad);
        break;
    }
    // Enough to diagnose; every rank stops at the same call (g_failures is per rank, and a
    // rank that stopped alone would leave its peers in a collective).
    const int32_t mine = g_failures > 20 ? 1 : 0;
    int32_t any = 0;
    comm.all_reduce(&mine, &any, 1, commfuse::DType::kInt32);
    if (any != 0) break;
  }
  EXPECT(comm.usable(), "unusable after the soak: %s", comm.failure().c_str());
  const long rss_end = rss_kb();
  const std::vector<std::string> shm_after = shm_entries();
  const double growth = rss_start > 0 ? 100.0 * (rss_end - rss_start) / rss_start : 0;
  std::printf(
      "rank %d: soak: %ld calls (%ld rejected or failed as intended, %ld results checked), RSS "
      "%.1f MiB after warm-up -> %.1f MiB at the end (%+.1f%%), /dev/shm commfuse entries %zu -> "
      "%zu\n",
      s.me, s.calls, s.rejected, s.checked, rss_start / 1024.0, rss_end / 1024.0, growth,
      shm_before.size(), shm_after.size());
  // Sanitizer builds set a looser limit (their allocators' quarantine and shadow memory
  // grow with the calls made, tests/ops/CMakeLists.txt): there RSS says nothing of ours.
  const char* limit_env = std::getenv("COMMFUSE_SOAK_RSS_LIMIT_PCT");
  const double limit = limit_env != nullptr ? std::atof(limit_env) : 5.0;
  EXPECT(growth < limit, "RSS grew %.1f%% (limit %.0f%%)", growth, limit);
  const std::vector<std::string> leaked = shm_leaked(shm_before, shm_after);
  EXPECT(leaked.empty(), "/dev/shm: %zu commfuse entries left behind, first %s", leaked.size(),
         leaked.empty() ? "" : leaked.front().c_str());
  return 0;
}

}  // namespace optest
