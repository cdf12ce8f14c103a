// Integer GEMM throughput of each exact int8 x int8 path (kernels/cpu/int_matmul.hpp),
// forced in turn at the same shape: oneDNN s8s8s32 where it is exact for int8 (VNNI / AMX;
// elsewhere an error row), and the exact f32-blocked path (the baseline, and what CPUs
// without VNNI run); and the s8 kernel over packed b in calls of fewer rows. Per iteration:
// prepare_b (as a call does) + GEMM. GOPS = 2*m*k*n / time. The operands are 64-byte aligned, as an
// op's workspace is (ops/common/op_context.hpp): from std::vector (16 bytes) the AMX s8 GEMM of
// 2048x4096x4096 measured 72-77 ms instead of 52.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>

#include "kernels/cpu/int_matmul.hpp"

namespace {

namespace cpu = commfuse::kernels::cpu;

struct Free {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
std::unique_ptr<T[], Free> aligned(size_t count) {
  const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  return std::unique_ptr<T[], Free>(static_cast<T*>(std::aligned_alloc(64, bytes)));
}

// Random int8 operands a (m x k) and b (k x n), 64-byte aligned.
struct Operands {
  std::unique_ptr<int8_t[], Free> a, b;
};
Operands random_operands(int64_t m, int64_t k, int64_t n) {
  std::mt19937 g(1);
  std::uniform_int_distribution<int> d(-128, 127);
  const size_t mk = static_cast<size_t>(m * k), kn = static_cast<size_t>(k * n);
  Operands o{aligned<int8_t>(mk), aligned<int8_t>(kn)};
  for (size_t i = 0; i < mk; ++i) o.a[i] = static_cast<int8_t>(d(g));
  for (size_t i = 0; i < kn; ++i) o.b[i] = static_cast<int8_t>(d(g));
  return o;
}

// m x k times k x n, dense and row-major, with int8's bounds.
cpu::IntMatmulDesc dense_desc(int64_t m, int64_t k, int64_t n) {
  cpu::IntMatmulDesc desc;
  desc.m = m;
  desc.k = k;
  desc.n = n;
  desc.lda = k;
  desc.ldb = n;
  desc.ldc = n;
  desc.a_max = 127;
  desc.b_max = 128;
  return desc;
}

void report(benchmark::State& state, int64_t m, int64_t k, int64_t n,
            const cpu::IntMatmulPlan& plan) {
  state.counters["GOPS"] = benchmark::Counter(static_cast<double>(2 * m * k * n),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
  state.SetLabel(cpu::describe(plan));
}

// A plan for desc with b as its kernel reads it: prepare() writes the prepared form (each
// iteration, as one execute prepares it), b_read is where the GEMM reads b (b itself where
// the kernel reads it plain and nothing is prepared).
struct PlannedB {
  std::shared_ptr<const cpu::IntMatmulPlan> plan;
  std::unique_ptr<uint8_t[], Free> prepared;
  const int8_t* b = nullptr;
  const void* b_read = nullptr;

  PlannedB(const cpu::IntMatmulDesc& desc, const int8_t* plain)
      : plan(cpu::plan_int_matmul(desc)),
        prepared(aligned<uint8_t>(cpu::prepared_b_bytes(*plan) + 64)),
        b(plain),
        b_read(cpu::prepared_b_bytes(*plan) ? static_cast<const void*>(prepared.get()) : plain) {}
  void prepare() const { cpu::prepare_b(*plan, b, prepared.get()); }
};

void run(benchmark::State& state, cpu::IntMatmulPath path) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  if (path == cpu::IntMatmulPath::kS8 &&
      cpu::choose_int_matmul_path(127, 128) != cpu::IntMatmulPath::kS8) {
    state.SkipWithError("s8s8s32 saturates for int8 weights on this CPU");
    return;
  }
  const Operands o = random_operands(m, k, n);
  cpu::IntMatmulDesc desc = dense_desc(m, k, n);
  desc.force_path = path;
  const PlannedB pb(desc, o.b.get());
  auto c = aligned<int32_t>(static_cast<size_t>(m * n));
  for (auto _ : state) {
    pb.prepare();
    cpu::int_matmul(*pb.plan, o.a.get(), pb.b_read, c.get());
    benchmark::DoNotOptimize(c.get());
  }
  report(state, m, k, n, *pb.plan);
}

// m rows (a multiple of `block`, range 3) over b packed once per iteration (as one execute
// packs it), in GEMM calls of `block` rows, as alltoall_quant_matmul's fused schedule and
// A8W8's chunks run them (int_matmul.hpp: kMinPackedCallRows).
void packed_blocks(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2), block = state.range(3);
  const Operands o = random_operands(m, k, n);
  cpu::IntMatmulDesc desc = dense_desc(block, k, n);
  desc.b_packed = true;
  const PlannedB pb(desc, o.b.get());
  auto c = aligned<int32_t>(static_cast<size_t>(block * n));
  for (auto _ : state) {
    pb.prepare();
    for (int64_t r = 0; r < m; r += block)
      cpu::int_matmul(*pb.plan, o.a.get() + r * k, pb.b_read, c.get());
    benchmark::DoNotOptimize(c.get());
  }
  report(state, m, k, n, *pb.plan);
}
BENCHMARK(packed_blocks)
    ->Args({2048, 4096, 4096, 64})
    ->Args({2048, 4096, 4096, 128})
    ->Args({2048, 4096, 4096, 256})
    ->Args({2048, 4096, 4096, 1024})
    ->Args({2048, 4096, 4096, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({2048, 4096, 4096})->Args({256, 4096, 4096})->Args({16, 4096, 4096});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(run, s8s8s32, cpu::IntMatmulPath::kS8)->Apply(shapes);
BENCHMARK_CAPTURE(run, f32_blocked, cpu::IntMatmulPath::kF32Blocked)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
