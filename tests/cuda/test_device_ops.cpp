// The operators' GPU schedules (ops/cuda/device_schedules.hpp) over the device context and
// its CUDA IPC heap, with W = 1, 2 and 4 ranks as processes sharing the GPU (ranks.hpp):
// all_gather_matmul (x2 plain and transposed, bias of x1's dtype or fp32, with and without
// gather_out), matmul_reduce_scatter and matmul_all_reduce, in bf16, fp16 and fp32; and
// quant_all_reduce / quant_reduce_scatter against the CPU kernel, bit for bit; alltoall_matmul
// and alltoall_quant_matmul (A16W8, A16W4, A4W4; x2 int8 / int4, plain or transposed); SPEC
// §6's A8W8 and HiF8 forms of the three matmul ops.
//
// The operands are multiples of 1/4 in [-2, 2], so every product and every partial sum is
// exact in fp32: the result is the exact value rounded once to the output dtype whatever
// order cuBLASLt accumulates in, and is compared bit for bit with the float64 reference
// rounded by commfuse::convert (x2 also with padded rows). Every case runs twice with
// different data, then: the rank-order sum and fp32 precision where they show
// (order_and_precision_case), a call one rank rejects followed by good ones
// (rejected_call_case), calls queued back to back on two streams with one rank held
// back (pipelined_case), more rows than the heap holds (it grows), and m = 0.
// matmul_all_reduce must give every rank the same bits, and each rank's
// matmul_reduce_scatter rows must be its rows of matmul_all_reduce, bit for bit.
// With the argument `nccl`, the same cases over the NCCL exchange (comm/nccl) at W = 1
// instead (NCCL refuses two ranks on one GPU; exit 77 where libnccl.so.2 does not load: at
// W = 1 the all-gather moves nothing, so this checks NCCL's set-up and the context's NCCL
// buffers and stream order, not a transfer). The sum kernel itself (kernels/cuda/sum_rows.hpp) is
// checked against the CPU's order of operations on random floats, and its argument checks without a
// device. With a number W (1-4), CUDA IPC at that W alone; COMMFUSE_TEST_PROGRESS=1 makes
// each rank name each case before it runs (where a run stands). Exit status: 0 passed, 1
// failed, 2 bad argument, 77 skipped (no usable device; COMMFUSE_REQUIRE_GPU=1: 1).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.hpp"
#include "core/code_values.hpp"
#include "kernels/cpu/dequant.hpp"
#include "kernels/cpu/quant_per_token.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/sum_rows.hpp"
#include "ops/cuda/device_schedules.hpp"
#include "ranks.hpp"

using commfuse::DType;
using cudatest::ok;
namespace kc = commfuse::kernels::cuda;
namespace oc = commfuse::ops::cuda;

namespace {

// A device buffer holding `values` converted to `dtype` (exactly, for the test's values).
struct DeviceTensor {
  void* p = nullptr;
  size_t bytes = 0;
  DeviceTensor(const std::vector<float>& values, DType dtype) {
    bytes = commfuse::dtype_storage_bytes(dtype, values.size());
    std::vector<uint8_t> host(bytes);
    if (!values.empty())
      commfuse::convert(values.data(), DType::kFloat32, host.data(), dtype, values.size());
    ok(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    if (bytes != 0) ok(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice), "upload");
  }
  DeviceTensor(size_t elems, DType dtype) : DeviceTensor(std::vector<float>(elems, 7.f), dtype) {}
  ~DeviceTensor() { cudaFree(p); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> h(bytes);
    ok(cudaDeviceSynchronize(), "synchronize");
    if (bytes != 0) ok(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost), "download");
    return h;
  }
};

const char* name(DType t) {
  return commfuse::dtype_name(t).data();  // the names are NUL-terminated literals
}

// A new device buffer holding `bytes` bytes from p (cudaFree it).
void* upload(const void* p, size_t bytes) {
  void* d = nullptr;
  ok(cudaMalloc(&d, bytes), "cudaMalloc");
  ok(cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice), "upload");
  return d;
}

// Multiples of 1/4 in [-2, 2], the same on every rank for the same seed.
std::vector<float> quarters(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(count);
  for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 4.f;
  return v;
}

// The exact values rounded once to dtype, as bytes.
std::vector<uint8_t> rounded(const std::vector<double>& exact, DType dtype) {
  std::vector<float> f(exact.begin(), exact.end());  // exact: see the header
  std::vector<uint8_t> out(commfuse::dtype_storage_bytes(dtype, f.size()));
  if (!f.empty()) commfuse::convert(f.data(), DType::kFloat32, out.data(), dtype, f.size());
  return out;
}

struct Case {
  int64_t m, k, n;
  bool transposed;
  int bias;  // 0 none, 1 x1's dtype, 2 float32
  bool gather;
  int64_t pad = 0;  // x2's stored rows are this many elements longer than they need
  int64_t ld() const { return (transposed ? k : n) + pad; }
};

// Rank r's operands of a case with data seed `seed`: x1 (m, k), x2 as stored, bias (n).
struct Operands {
  std::vector<float> x1, x2, bias;
};
Operands operands(const Case& c, int r, unsigned seed) {
  return {
      quarters(static_cast<size_t>(c.m * c.k), seed * 1000 + 10 * r + 1),
      quarters(static_cast<size_t>((c.transposed ? c.n : c.k) * c.ld()), seed * 1000 + 10 * r + 2),
      quarters(static_cast<size_t>(c.n), seed * 1000 + 3)};
}
// x2[kk][j] of a stored operand.
float x2_at(const Case& c, const std::vector<float>& x2, int64_t kk, int64_t j) {
  return c.transposed ? x2[static_cast<size_t>(j * c.ld() + kk)]
                      : x2[static_cast<size_t>(kk * c.ld() + j)];
}

oc::DeviceMatmul describe(const Case& c, DType dtype, const DeviceTensor& x1,
                          const DeviceTensor& x2, const DeviceTensor* bias, DeviceTensor& out) {
  oc::DeviceMatmul a;
  a.dtype = dtype;
  a.m = c.m, a.k = c.k, a.n = c.n;
  a.x1 = x1.p;
  a.x2 = x2.p;
  a.ld_x2 = c.ld();
  a.x2_transposed = c.transposed;
  a.bias = bias != nullptr ? bias->p : nullptr;
  a.bias_dtype = c.bias == 2 ? DType::kFloat32 : dtype;
  a.out = out.p;
  return a;
}

void check_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                 const char* what, int rank, int size, DType dtype, const Case& c) {
  CHECK(got == want, "rank %d of %d: %s %s m=%lld k=%lld n=%lld t=%d bias=%d differs", rank, size,
        what, name(dtype), static_cast<long long>(c.m), static_cast<long long>(c.k),
        static_cast<long long>(c.n), c.transposed, c.bias);
}

// One all_gather_matmul call: its operands on the device, queued by launch, checked (after
// the device is idle) against the float64 reference rounded once.
class AgmCall {
 public:
  AgmCall(int rank, int size, const Case& c, DType dtype, unsigned seed)
      : rank_(rank),
        size_(size),
        c_(c),
        dtype_(dtype),
        seed_(seed),
        mine_(operands(c, rank, seed)),
        x1_(mine_.x1, dtype),
        x2_(mine_.x2, dtype),
        bias_(mine_.bias, c.bias == 2 ? DType::kFloat32 : dtype),
        out_(static_cast<size_t>(c.m * size * c.n), dtype),
        gathered_(static_cast<size_t>(c.m * size * c.k), dtype) {}
  void launch(oc::DeviceContext& ctx, void* stream) {
    oc::all_gather_matmul(ctx,
                          describe(c_, dtype_, x1_, x2_, c_.bias != 0 ? &bias_ : nullptr, out_),
                          c_.gather ? gathered_.p : nullptr, stream);
  }
  void check() const {
    const Case& c = c_;
    std::vector<double> want(static_cast<size_t>(c.m * size_ * c.n));
    std::vector<float> want_gather;
    for (int s = 0; s < size_; ++s) {
      const std::vector<float> x1s = operands(c, s, seed_).x1;  // rank s's rows
      want_gather.insert(want_gather.end(), x1s.begin(), x1s.end());
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double acc = c.bias != 0 ? mine_.bias[static_cast<size_t>(j)] : 0.0;
          for (int64_t kk = 0; kk < c.k; ++kk)
            acc += double{x1s[static_cast<size_t>(i * c.k + kk)]} * x2_at(c, mine_.x2, kk, j);
          want[static_cast<size_t>((s * c.m + i) * c.n + j)] = acc;
        }
    }
    check_bytes(out_.download(), rounded(want, dtype_), "all_gather_matmul output", rank_, size_,
                dtype_, c);
    if (c.gather)
      check_bytes(gathered_.download(),
                  rounded(std::vector<double>(want_gather.begin(), want_gather.end()), dtype_),
                  "all_gather_matmul gather_out", rank_, size_, dtype_, c);
  }

 private:
  int rank_, size_;
  Case c_;
  DType dtype_;
  unsigned seed_;
  Operands mine_;
  DeviceTensor x1_, x2_, bias_, out_, gathered_;
};

void all_gather_matmul_case(oc::DeviceContext& ctx, const Case& c, DType dtype, unsigned seed) {
  AgmCall call(ctx.rank(), ctx.size(), c, dtype, seed);
  call.launch(ctx, nullptr);
  call.check();
}

// Calls queued back to back on two non-blocking streams in turn, nothing synchronized in
// between, distinct data and outputs, rank 0's first stream held back by long GEMMs so that
// its peers run ahead: every result must still be right. (A peer's next-but-one call is
// ordered after rank 0's reads by the kReady and call-chaining waits as well as by kDone, so
// this checks the whole ordering, not kDone alone.) Checked once the device is idle.
void pipelined_case(oc::DeviceContext& ctx) {
  constexpr int kCalls = 6;
  cudaStream_t s[2];
  for (auto& x : s) ok(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking), "stream");
  constexpr int64_t kBig = 4096;
  DeviceTensor a(static_cast<size_t>(kBig * kBig), DType::kBFloat16),
      b(static_cast<size_t>(kBig * kBig), DType::kBFloat16),
      c(static_cast<size_t>(kBig * kBig), DType::kFloat32);
  void* ws = nullptr;
  ok(cudaMalloc(&ws, kc::kGemmWorkspaceBytes), "cudaMalloc");
  if (ctx.rank() == 0) {
    kc::GemmDesc d;
    d.m = d.k = d.n = kBig;
    d.ab_dtype = d.b_dtype = DType::kBFloat16;
    d.c_dtype = DType::kFloat32;
    d.lda = d.ldb = d.ldc = kBig;
    for (int i = 0; i < 4; ++i) kc::gemm(d, a.p, b.p, c.p, ws, kc::kGemmWorkspaceBytes, s[0]);
  }
  std::vector<std::unique_ptr<AgmCall>> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(std::make_unique<AgmCall>(ctx.rank(), ctx.size(),
                                              Case{7, 64, 40, i % 2 == 1, i % 3, true, 3},
                                              DType::kBFloat16, 100u + static_cast<unsigned>(i)));
    calls.back()->launch(ctx, s[i % 2]);
  }
  ok(cudaDeviceSynchronize(), "synchronize");
  for (const auto& call : calls) call->check();
  cudaFree(ws);
  for (auto& x : s) cudaStreamDestroy(x);
}

// FNV-1a of a result, to compare ranks' bits over the board.
std::string digest(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (const uint8_t x : b) h = (h ^ x) * 1099511628211ull;
  return std::to_string(h);
}

void matmul_reduce_case(oc::DeviceContext& ctx, cudatest::Meeting& meeting, const Case& c,
                        DType dtype, unsigned seed) {
  const int rank = ctx.rank(), size = ctx.size();
  const Operands mine = operands(c, rank, seed);
  DeviceTensor x1(mine.x1, dtype), x2(mine.x2, dtype);
  DeviceTensor bias(mine.bias, c.bias == 2 ? DType::kFloat32 : dtype);
  DeviceTensor all(static_cast<size_t>(c.m * c.n), dtype);
  DeviceTensor block(static_cast<size_t>(c.m / size * c.n), dtype);
  const DeviceTensor* b = c.bias != 0 ? &bias : nullptr;
  oc::matmul_reduce(ctx, describe(c, dtype, x1, x2, b, all), /*all_reduce=*/true, nullptr);
  oc::matmul_reduce(ctx, describe(c, dtype, x1, x2, b, block), /*all_reduce=*/false, nullptr);
  // Every rank's operands made once: made per output element, the 512-rows-a-rank case ran
  // for minutes at W = 2 (m * n * (W - 1) regenerations).
  std::vector<Operands> ops;
  for (int s = 0; s < size; ++s) ops.push_back(s == rank ? mine : operands(c, s, seed));
  std::vector<double> want(static_cast<size_t>(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = c.bias != 0 ? mine.bias[static_cast<size_t>(j)] : 0.0;  // same on all ranks
      for (int s = 0; s < size; ++s) {
        const Operands& o = ops[static_cast<size_t>(s)];
        for (int64_t kk = 0; kk < c.k; ++kk)
          acc += double{o.x1[static_cast<size_t>(i * c.k + kk)]} * x2_at(c, o.x2, kk, j);
      }
      want[static_cast<size_t>(i * c.n + j)] = acc;
    }
  const std::vector<uint8_t> got = all.download();
  check_bytes(got, rounded(want, dtype), "matmul_all_reduce", rank, size, dtype, c);
  const size_t bb = block.bytes;
  check_bytes(block.download(),
              std::vector<uint8_t>(got.begin() + static_cast<ptrdiff_t>(bb * rank),
                                   got.begin() + static_cast<ptrdiff_t>(bb * (rank + 1))),
              "matmul_reduce_scatter (its rows of matmul_all_reduce)", rank, size, dtype, c);
  const std::vector<std::string> digests = meeting.all_gather(digest(got));
  for (int s = 0; s < size; ++s)
    CHECK(digests[static_cast<size_t>(s)] == digests[0],
          "rank %d of %d: matmul_all_reduce's bits differ between rank 0 and rank %d", rank, size,
          s);
}

// Where order and precision show: matmul_all_reduce with rank r's x1 = v[r % 4], v = {2^24,
// 1, -2^24, 1}, k = 1, x2 = 1, whose fp32 sum in rank order ((2^24 + 1) - 2^24) + 1 = 1 at
// W = 4 differs from every other order's; and an fp32 all_gather_matmul of 1 + 2^-20, whose
// last bit a TF32 GEMM would drop.
void order_and_precision_case(oc::DeviceContext& ctx) {
  const int rank = ctx.rank(), size = ctx.size();
  constexpr int64_t kRows = 4, kN = 8;
  const float v[4] = {16777216.f, 1.f, -16777216.f, 1.f};
  volatile float want = v[0];  // no reassociation, no contraction
  for (int r = 1; r < size; ++r) want = want + v[r % 4];
  DeviceTensor ones(std::vector<float>(kN, 1.f), DType::kFloat32);
  DeviceTensor x1(std::vector<float>(kRows, v[rank % 4]), DType::kFloat32);
  DeviceTensor sum(static_cast<size_t>(kRows * kN), DType::kFloat32);
  oc::DeviceMatmul a;
  a.dtype = DType::kFloat32;
  a.m = kRows, a.k = 1, a.n = kN;
  a.x1 = x1.p;
  a.x2 = ones.p;
  a.ld_x2 = kN;
  a.out = sum.p;
  oc::matmul_reduce(ctx, a, /*all_reduce=*/true, nullptr);
  const float w = want;
  std::vector<uint8_t> want_bytes(static_cast<size_t>(kRows * kN) * 4);
  for (size_t e = 0; e < want_bytes.size(); e += 4) std::memcpy(&want_bytes[e], &w, 4);
  CHECK(sum.download() == want_bytes,
        "rank %d of %d: matmul_all_reduce is not the rank-order sum %g", rank, size,
        static_cast<double>(w));

  const float fine = 1.f + 0x1p-20f;
  DeviceTensor x1f(std::vector<float>(kRows, fine), DType::kFloat32);
  DeviceTensor out(static_cast<size_t>(kRows * size * kN), DType::kFloat32);
  a.x1 = x1f.p;
  a.out = out.p;
  oc::all_gather_matmul(ctx, a, nullptr, nullptr);
  std::vector<uint8_t> fine_bytes(static_cast<size_t>(kRows * size * kN) * 4);
  for (size_t e = 0; e < fine_bytes.size(); e += 4) std::memcpy(&fine_bytes[e], &fine, 4);
  CHECK(out.download() == fine_bytes,
        "rank %d of %d: an fp32 all_gather_matmul lost 1 + 2^-20's last bit (TF32?)", rank, size);
}

// A call rank 1 rejects before it starts (as the API's plan step does), while its peers are
// inside it: their exchange fails, as the communicator's barrier fails every rank of a
// rejected call; cancel_call must say the ranks are still in step, and the next call must
// be right on every rank (had the peers switched halves at begin_call, they would now read
// a different half than rank 1 writes).
void rejected_call_case(oc::DeviceContext& ctx, bool& reject_next) {
  const Case c{6, 64, 16, false, 1, true};
  if (ctx.size() >= 2) {
    AgmCall call(ctx.rank(), ctx.size(), c, DType::kBFloat16, 7);
    bool threw = false;
    reject_next = ctx.rank() == 1;
    try {
      if (ctx.rank() == 1)
        ctx.exchange();  // rank 1 takes part only in the synchronization that fails the call
      else
        call.launch(ctx, nullptr);
    } catch (const std::runtime_error&) {
      threw = true;
      CHECK(ctx.cancel_call(/*failed_at_synchronization=*/true),
            "rank %d: a call rejected at its synchronization left the ranks out of step",
            ctx.rank());
    }
    reject_next = false;
    CHECK(threw, "rank %d: the rejected call did not fail", ctx.rank());
  }
  all_gather_matmul_case(ctx, c, DType::kBFloat16, 8);
  all_gather_matmul_case(ctx, c, DType::kBFloat16, 9);
}

// quant_all_reduce / quant_reduce_scatter (quant_reduce) against the CPU kernel over the
// same codes and scales, bit for bit: K-G int8 and MX float8_e4m3fn (codes avoid NaN, whose
// payloads the two may print differently), to fp32 and bf16; reduce_scatter's rows must be
// its rows of all_reduce.
void quant_reduce_case(oc::DeviceContext& ctx, DType x_dtype, bool mx, DType out_dtype) {
  namespace cpu = commfuse::kernels::cpu;
  const int rank = ctx.rank(), size = ctx.size();
  const int64_t rows = 6 * size, h = 512;
  const cpu::ScaleKind kind = mx ? cpu::ScaleKind::kMx32 : cpu::ScaleKind::kGroup128;
  const int64_t srb = cpu::scale_row_bytes(kind, h);
  auto block = [&](int r, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales) {
    std::mt19937 rng(500 + static_cast<unsigned>(r));
    codes.resize(static_cast<size_t>(rows * h));
    for (auto& c : codes) {
      c = static_cast<uint8_t>(rng());
      if (x_dtype == DType::kFloat8E4M3FN && (c & 0x7F) == 0x7F) c ^= 1;  // not NaN
    }
    scales.resize(static_cast<size_t>(rows * srb));
    if (mx) {
      for (auto& s : scales) s = static_cast<uint8_t>(115 + rng() % 25);
    } else {
      std::normal_distribution<float> d(0.f, 0.01f);
      for (size_t i = 0; i < scales.size(); i += 4) {
        const float f = d(rng);
        std::memcpy(&scales[i], &f, 4);
      }
    }
  };
  std::vector<std::vector<uint8_t>> codes(static_cast<size_t>(size)), scales(codes.size());
  for (int r = 0; r < size; ++r)
    block(r, codes[static_cast<size_t>(r)], scales[static_cast<size_t>(r)]);
  std::vector<float> want(static_cast<size_t>(rows * h));
  for (int64_t i = 0; i < rows; ++i)
    for (int r = 0; r < size; ++r)
      cpu::dequant_accumulate_row(x_dtype, kind, codes[static_cast<size_t>(r)].data() + i * h,
                                  scales[static_cast<size_t>(r)].data() + i * srb, h,
                                  want.data() + i * h, r == 0);
  std::vector<uint8_t> want_bytes(commfuse::dtype_storage_bytes(out_dtype, want.size()));
  commfuse::convert(want.data(), DType::kFloat32, want_bytes.data(), out_dtype, want.size());

  void* dx =
      upload(codes[static_cast<size_t>(rank)].data(), codes[static_cast<size_t>(rank)].size());
  void* ds =
      upload(scales[static_cast<size_t>(rank)].data(), scales[static_cast<size_t>(rank)].size());
  DeviceTensor all(static_cast<size_t>(rows * h), out_dtype),
      mine(static_cast<size_t>(rows / size * h), out_dtype);
  oc::DeviceQuantReduce a;
  a.x_dtype = x_dtype;
  a.mx = mx;
  a.rows = rows;
  a.h = h;
  a.x = dx;
  a.scales = ds;
  a.scale_row_bytes = srb;
  a.out_dtype = out_dtype;
  a.out = all.p;
  oc::quant_reduce(ctx, a, /*all_reduce=*/true, nullptr);
  a.out = mine.p;
  oc::quant_reduce(ctx, a, /*all_reduce=*/false, nullptr);
  const std::vector<uint8_t> got = all.download();
  CHECK(got == want_bytes,
        "rank %d of %d: quant_all_reduce %s %s -> %s differs from the CPU kernel", rank, size,
        name(x_dtype), mx ? "MX" : "K-G", name(out_dtype));
  const size_t bb = mine.bytes;
  CHECK(mine.download() ==
            std::vector<uint8_t>(got.begin() + static_cast<ptrdiff_t>(bb * rank),
                                 got.begin() + static_cast<ptrdiff_t>(bb * (rank + 1))),
        "rank %d of %d: quant_reduce_scatter's rows are not its rows of quant_all_reduce", rank,
        size);
  cudaFree(dx);
  cudaFree(ds);
}

// This rank's permuted rows of an alltoall (SPEC §3) whose rank s holds x1_of(s), (bs, h):
// permuted[i, s*h + c] = x1 of rank s, row rank*rows + i.
template <typename T, typename X1Of>
std::vector<T> permute(int rank, int size, int64_t rows, int64_t h, X1Of x1_of) {
  const int64_t k = h * size;
  std::vector<T> permuted(static_cast<size_t>(rows * k));
  for (int s = 0; s < size; ++s) {
    const std::vector<T> xs = x1_of(s);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < h; ++c)
        permuted[static_cast<size_t>(i * k + s * h + c)] =
            xs[static_cast<size_t>((rank * rows + i) * h + c)];
  }
  return permuted;
}

// int4 values packed two per byte (SPEC §1), by the library's own packer.
std::vector<uint8_t> packed_int4(const std::vector<int8_t>& v) {
  std::vector<uint8_t> out(v.size() / 2);
  commfuse::pack_int4(v.data(), out.data(), v.size());
  return out;
}

// alltoall_matmul (exact operands, so bit for bit with the float64 reference; with and
// without bias, x2 plain and transposed, all_to_all_out checked too).
void alltoall_case(oc::DeviceContext& ctx, bool transposed, int bias) {
  const int rank = ctx.rank(), size = ctx.size();
  const int64_t rows = 3, bs = rows * size, h = 64, k = h * size, n = 24;
  const DType dt = DType::kBFloat16;
  auto x1_of = [&](int s) {
    return quarters(static_cast<size_t>(bs * h), 900u + static_cast<unsigned>(s));
  };
  // x2 as stored: (k, n), or transposed (n, k).
  std::vector<float> x2f = quarters(static_cast<size_t>(k * n), 950u + static_cast<unsigned>(rank));
  auto x2_at = [&](int64_t kk, int64_t j) {
    return double{x2f[static_cast<size_t>(transposed ? j * k + kk : kk * n + j)]};
  };
  const std::vector<float> bias_v = quarters(static_cast<size_t>(n), 970u);
  const std::vector<float> permuted = permute<float>(rank, size, rows, h, x1_of);
  std::vector<double> want(static_cast<size_t>(rows * n));
  const DType bias_dtype = bias == 2 ? DType::kFloat32 : dt;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias != 0 ? bias_v[static_cast<size_t>(j)] : 0.0;
      for (int64_t kk = 0; kk < k; ++kk)
        acc += permuted[static_cast<size_t>(i * k + kk)] * x2_at(kk, j);
      want[static_cast<size_t>(i * n + j)] = acc;
    }
  DeviceTensor x1(x1_of(rank), dt), x2(x2f, dt), bias_t(bias_v, bias_dtype),
      out(static_cast<size_t>(rows * n), dt), a2a(static_cast<size_t>(rows * k), dt);
  oc::DeviceAlltoAll a;
  a.x1_dtype = a.out_dtype = dt;
  a.bs = bs;
  a.h = h;
  a.n = n;
  a.x1 = x1.p;
  a.x2 = x2.p;
  a.x2_transposed = transposed;
  a.bias = bias != 0 ? bias_t.p : nullptr;
  a.bias_dtype = bias_dtype;
  a.out = out.p;
  a.all_to_all_out = bias == 1 ? nullptr : a2a.p;  // bias 1: permuted rows in scratch
  oc::alltoall_matmul(ctx, a, nullptr);
  CHECK(out.download() == rounded(want, dt), "rank %d of %d: alltoall_matmul t=%d bias=%d differs",
        rank, size, transposed, bias);
  if (a.all_to_all_out != nullptr)
    CHECK(a2a.download() == rounded(std::vector<double>(permuted.begin(), permuted.end()), dt),
          "rank %d of %d: all_to_all_out differs", rank, size);
}

// alltoall_quant_matmul (SPEC §3) against the CPU's quantizer and epilogue order: A16W8 and
// A16W4 (bf16 x1, dynamic per-token quantization with Q = 127 / 7, smooth scale unless
// bias 1) and A4W4 (int4 x1 with per-token scales travelling with their rows, fp16 output,
// one product per source segment summed in rank order); x2 int8 or int4, plain or
// transposed (the schedule converts it to cuBLASLt's int8 TN form); all_to_all_out (A4W4:
// packed int4) unless bias 1.
enum class Combo { kA16W8, kA16W4, kA4W4 };
// h = 36: segment pointers of A4W4's per-segment GEMMs only 4-byte aligned.
void alltoall_quant_case(oc::DeviceContext& ctx, Combo combo, bool transposed, int bias,
                         int64_t h = 64) {
  namespace cpu = commfuse::kernels::cpu;
  const int rank = ctx.rank(), size = ctx.size();
  const int64_t rows = 3, bs = rows * size, k = h * size, n = 24;
  const bool a4w4 = combo == Combo::kA4W4, w4 = combo != Combo::kA16W8;
  const DType dt = DType::kBFloat16, out_dt = a4w4 ? DType::kFloat16 : dt;
  const DType bias_dtype = bias == 2 ? DType::kFloat32 : dt;
  auto x1_of = [&](int s) {  // A16: bf16 quarters
    return quarters(static_cast<size_t>(bs * h), 900u + static_cast<unsigned>(s));
  };
  auto codes_of = [&](int s) {  // A4W4: int4 codes in [-8, 7]
    std::mt19937 rng(910u + static_cast<unsigned>(s));
    std::vector<int8_t> v(static_cast<size_t>(bs * h));
    for (auto& c : v) c = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
    return v;
  };
  auto token_scales_of = [&](int s) {  // A4W4: per-token scales (bs,)
    std::vector<float> v(static_cast<size_t>(bs));
    for (int64_t i = 0; i < bs; ++i)
      v[static_cast<size_t>(i)] = 0.03f * static_cast<float>(1 + (7 * s + 3 * i) % 11);
    return v;
  };
  // x2 as stored, (k, n) or transposed (n, k): int8 in [-32, 32] or int4 in [-8, 7].
  std::vector<int8_t> x2q(static_cast<size_t>(k * n));
  {
    std::mt19937 rng(950u + static_cast<unsigned>(rank));
    for (auto& v : x2q)
      v = static_cast<int8_t>(w4 ? static_cast<int>(rng() % 16) - 8
                                 : static_cast<int>(rng() % 65) - 32);
  }
  auto x2_at = [&](int64_t kk, int64_t j) {
    return int64_t{x2q[static_cast<size_t>(transposed ? j * k + kk : kk * n + j)]};
  };
  const std::vector<float> bias_v = quarters(static_cast<size_t>(n), 970u);
  const std::vector<float> smooth = quarters(static_cast<size_t>(k), 980u);
  std::vector<float> x2_scale(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    x2_scale[static_cast<size_t>(j)] = 0.01f * static_cast<float>(j + 1);
  const bool use_smooth = !a4w4 && bias != 1;

  // The permuted codes and, per row, one scale per segment (A16: one segment, all of k).
  const int segments = a4w4 ? size : 1;
  const int64_t seg_k = a4w4 ? h : k;
  std::vector<int8_t> q(static_cast<size_t>(rows * k));
  std::vector<float> seg_scale(static_cast<size_t>(rows * segments));
  const std::vector<float> permuted = permute<float>(rank, size, rows, h, x1_of);
  const std::vector<int8_t> permuted_codes = permute<int8_t>(rank, size, rows, h, codes_of);
  for (int64_t i = 0; i < rows; ++i) {
    if (a4w4) {
      for (int s = 0; s < size; ++s)
        seg_scale[static_cast<size_t>(i * size + s)] =
            token_scales_of(s)[static_cast<size_t>(rank * rows + i)];
      continue;
    }
    std::vector<float> v(permuted.begin() + i * k, permuted.begin() + (i + 1) * k);
    if (use_smooth)
      for (int64_t c = 0; c < k; ++c) v[static_cast<size_t>(c)] *= smooth[static_cast<size_t>(c)];
    seg_scale[static_cast<size_t>(i)] = cpu::quantize_row_per_token(
        v.data(), static_cast<size_t>(k), w4 ? 7 : 127, q.data() + i * k);
  }
  if (a4w4) q = permuted_codes;
  std::vector<float> want(static_cast<size_t>(rows * n));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      volatile float y = 0.f;
      for (int s = 0; s < segments; ++s) {
        int64_t acc = 0;
        for (int64_t c = s * seg_k; c < (s + 1) * seg_k; ++c)
          acc += int64_t{q[static_cast<size_t>(i * k + c)]} * x2_at(c, j);
        const float sc = seg_scale[static_cast<size_t>(i * segments + s)];
        const float sb = x2_scale[static_cast<size_t>(j)];
        volatile float t = static_cast<float>(static_cast<int32_t>(acc));
        if (a4w4) {  // (acc * s_s) * x2_scale, summed in rank order
          t = t * sc;
          t = t * sb;
          y = s == 0 ? float{t} : y + t;
        } else {  // (acc * x2_scale) * s
          t = t * sb;
          y = t * sc;
        }
      }
      if (bias != 0) y = y + bias_v[static_cast<size_t>(j)];
      want[static_cast<size_t>(i * n + j)] = y;
    }
  std::vector<uint8_t> want_bytes(commfuse::dtype_storage_bytes(out_dt, want.size()));
  commfuse::convert(want.data(), DType::kFloat32, want_bytes.data(), out_dt, want.size());

  DeviceTensor x1(x1_of(rank), dt), bias_t(bias_v, bias_dtype), smooth_t(smooth, dt),
      scale_t(x2_scale, DType::kFloat32), out(static_cast<size_t>(rows * n), out_dt),
      a2a(static_cast<size_t>(rows * k), dt), tokens_t(token_scales_of(rank), DType::kFloat32);
  // x2 packs to int4 only for the w4 combos: A16W8's values are outside int4's range.
  const std::vector<uint8_t> x1_packed = packed_int4(codes_of(rank)),
                             x2_packed = w4 ? packed_int4(x2q) : std::vector<uint8_t>{};
  void* x1_4 = upload(x1_packed.data(), x1_packed.size());
  void* x2 = w4 ? upload(x2_packed.data(), x2_packed.size()) : upload(x2q.data(), x2q.size());
  oc::DeviceAlltoAll a;
  a.x1_dtype = a4w4 ? DType::kInt4 : dt;
  a.bs = bs;
  a.h = h;
  a.n = n;
  a.x1 = a4w4 ? x1_4 : x1.p;
  a.x2 = x2;
  a.x2_transposed = transposed;
  a.bias = bias != 0 ? bias_t.p : nullptr;
  a.bias_dtype = bias_dtype;
  a.out_dtype = out_dt;
  a.out = out.p;
  a.all_to_all_out = bias == 1 ? nullptr : a2a.p;
  a.quantized = true;
  a.b_dtype = w4 ? DType::kInt4 : DType::kInt8;
  a.x2_scale = static_cast<const float*>(scale_t.p);
  a.smooth = use_smooth ? smooth_t.p : nullptr;
  a.token_scale = a4w4 ? static_cast<const float*>(tokens_t.p) : nullptr;
  oc::alltoall_matmul(ctx, a, nullptr);
  const char* names[] = {"A16W8", "A16W4", "A4W4"};
  CHECK(out.download() == want_bytes,
        "rank %d of %d: alltoall_quant_matmul %s t=%d bias=%d differs", rank, size,
        names[static_cast<int>(combo)], transposed, bias);
  if (a.all_to_all_out != nullptr) {
    std::vector<uint8_t> got = a2a.download();
    const std::vector<uint8_t> want_a2a =
        a4w4 ? packed_int4(permuted_codes)
             : rounded(std::vector<double>(permuted.begin(), permuted.end()), dt);
    got.resize(want_a2a.size());
    CHECK(got == want_a2a, "rank %d of %d: %s all_to_all_out differs", rank, size,
          names[static_cast<int>(combo)]);
  }
  cudaFree(x1_4);
  cudaFree(x2);
}

// SPEC §6 A8W8 on the device schedules: all_gather_matmul (per-token x1 scales travelling
// with their rows, per-channel x2 scales, an int32 / fp32 / bf16 bias) and matmul_all_reduce
// / matmul_reduce_scatter (each rank's scaled fp32 partial, summed in rank order, bias once),
// against the CPU's order of operations: y = f32(acc (+ int bias)) * (sa * sb) (+ bias).
// form: the x1 scales' form on every rank (0 per token, 1 per tensor, 2 absent), or 3: each
// rank its own (rank % 3), as ranks may pass them.
// code: int8 (A8W8), or hifloat8 (HiF8) / float8_e4m3fn (FP8): quarters in [-2, 2], exact in
// both, so every product and sum is exact in fp32 whatever order the GEMM sums in; x2 stored
// (n, k) (transposed) or (k, n).
void a8w8_case(oc::DeviceContext& ctx, int bias, int form,  // bias: 0 none, 1 int32, 2 fp32, 3 bf16
               DType code = DType::kInt8, bool transposed = true) {
  const int rank = ctx.rank(), size = ctx.size();
  const int64_t m = 3, k = 96, n = 16;
  const DType out_dtype = DType::kBFloat16;
  const char* mode = code == DType::kInt8 ? "A8W8" : code == DType::kHiFloat8 ? "HiF8" : "FP8";
  const float* value = commfuse::code_values(code);  // code byte -> value (the CPU's table)
  auto codes = [&](size_t count, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<int8_t> v(count);
    if (code == DType::kInt8) {
      for (auto& x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    } else {
      const std::vector<float> q = quarters(count, seed);
      commfuse::convert(q.data(), DType::kFloat32, v.data(), code, count);
    }
    return v;
  };
  auto scales = [](size_t count, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<float> v(count);
    for (auto& x : v) x = 0.001f * static_cast<float>(rng() % 997 + 1);
    return v;
  };
  auto x1_of = [&](int s) {
    return codes(static_cast<size_t>(m * k), 1300u + static_cast<unsigned>(s));
  };
  auto sa_of = [&](int s) {
    return scales(static_cast<size_t>(m), 1400u + static_cast<unsigned>(s));
  };
  auto x2_of = [&](int s) {
    return codes(static_cast<size_t>(n * k), 1500u + static_cast<unsigned>(s));
  };
  auto sb_of = [&](int s) {
    return scales(static_cast<size_t>(n), 1600u + static_cast<unsigned>(s));
  };
  std::vector<float> bias_f = quarters(static_cast<size_t>(n), 1700u);
  std::vector<int32_t> bias_i(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    bias_i[static_cast<size_t>(j)] = static_cast<int32_t>(j * 37 - 300);
  // acc of x1 rows of rank s times x2 of rank w (logically (n, k)): exact in a double.
  auto acc = [&](const std::vector<int8_t>& x1, const std::vector<int8_t>& x2, int64_t i,
                 int64_t j) {
    double a = 0;
    for (int64_t kk = 0; kk < k; ++kk)
      a += double{value[static_cast<uint8_t>(x1[static_cast<size_t>(i * k + kk)])]} *
           value[static_cast<uint8_t>(x2[static_cast<size_t>(j * k + kk)])];
    return a;
  };
  const std::vector<int8_t> x1 = x1_of(rank), x2 = x2_of(rank);
  std::vector<int8_t> x2_stored = x2;  // (n, k), or (k, n) when not transposed
  if (!transposed)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = 0; kk < k; ++kk)
        x2_stored[static_cast<size_t>(kk * n + j)] = x2[static_cast<size_t>(j * k + kk)];
  const std::vector<float> sa = sa_of(rank), sb = sb_of(rank);
  void* dx1 = upload(x1.data(), x1.size());
  void* dx2 = upload(x2_stored.data(), x2_stored.size());
  void* dsa = upload(sa.data(), sa.size() * 4);
  void* dsb = upload(sb.data(), sb.size() * 4);
  std::vector<uint8_t> bias_bf(commfuse::dtype_storage_bytes(DType::kBFloat16, bias_f.size()));
  commfuse::convert(bias_f.data(), DType::kFloat32, bias_bf.data(), DType::kBFloat16,
                    bias_f.size());
  void* dbias = bias == 1   ? upload(bias_i.data(), bias_i.size() * 4)
                : bias == 2 ? upload(bias_f.data(), bias_f.size() * 4)
                            : upload(bias_bf.data(), bias_bf.size());
  oc::DeviceMatmul a;
  a.dtype = code;
  a.m = m, a.k = k, a.n = n;
  a.x1 = dx1;
  a.x2 = dx2;
  a.ld_x2 = transposed ? k : n;
  a.x2_transposed = transposed;
  a.quantized = true;
  a.b_dtype = code;
  a.out_dtype = out_dtype;
  auto form_of = [&](int s) { return form == 3 ? s % 3 : form; };
  // Rank s's scale of row i as the op defines it: per token, per tensor (the first), or 1.
  auto scale_of = [&](int s, const std::vector<float>& sa_s, int64_t i) {
    return form_of(s) == 0 ? sa_s[static_cast<size_t>(i)] : form_of(s) == 1 ? sa_s[0] : 1.f;
  };
  a.x1_scale = form_of(rank) == 2 ? nullptr : static_cast<const float*>(dsa);
  a.x1_per_token = form_of(rank) == 0;
  DeviceTensor gathered(static_cast<size_t>(m * size * k), DType::kInt8);  // the codes' bytes
  a.x2_scale = static_cast<const float*>(dsb);
  a.x2_per_channel = true;
  a.bias = bias == 0 || bias == 1 ? nullptr : dbias;
  a.bias_dtype = bias == 3 ? DType::kBFloat16 : DType::kFloat32;
  a.bias_int = bias == 1 ? static_cast<const int32_t*>(dbias) : nullptr;

  // all_gather_matmul
  DeviceTensor out(static_cast<size_t>(m * size * n), out_dtype);
  a.out = out.p;
  oc::all_gather_matmul(ctx, a, gathered.p, nullptr);
  std::vector<float> want(static_cast<size_t>(m * size * n));
  for (int s = 0; s < size; ++s) {
    const std::vector<int8_t> xs = x1_of(s);
    const std::vector<float> ss = sa_of(s);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double sum = acc(xs, x2, i, j) + (bias == 1 ? bias_i[static_cast<size_t>(j)] : 0);
        volatile float scale = scale_of(s, ss, i) * sb[static_cast<size_t>(j)];
        volatile float y = static_cast<float>(sum) * scale;
        if (bias >= 2) y = y + bias_f[static_cast<size_t>(j)];  // bf16 bias: quarters, exact
        want[static_cast<size_t>((s * m + i) * n + j)] = y;
      }
  }
  std::vector<uint8_t> want_bytes(commfuse::dtype_storage_bytes(out_dtype, want.size()));
  commfuse::convert(want.data(), DType::kFloat32, want_bytes.data(), out_dtype, want.size());
  CHECK(out.download() == want_bytes, "rank %d of %d: %s all_gather_matmul t=%d bias=%d differs",
        rank, size, mode, transposed, bias);
  std::vector<uint8_t> want_gathered;
  for (int s = 0; s < size; ++s) {
    const std::vector<int8_t> xs = x1_of(s);
    want_gathered.insert(want_gathered.end(), xs.begin(), xs.end());
  }
  CHECK(gathered.download() == want_gathered, "rank %d of %d: %s gather_out differs", rank, size,
        mode);

  // matmul_all_reduce / matmul_reduce_scatter (float biases only, SPEC §6)
  if (bias != 1) {
    const int64_t rows = m * size;  // x1 of the reducing ops: (rows, k), its own codes per rank
    auto rx1_of = [&](int s) {
      return codes(static_cast<size_t>(rows * k), 1800u + static_cast<unsigned>(s));
    };
    auto rsa_of = [&](int s) {
      return scales(static_cast<size_t>(rows), 1900u + static_cast<unsigned>(s));
    };
    const std::vector<int8_t> rx1 = rx1_of(rank);
    const std::vector<float> rsa = rsa_of(rank);
    void* drx1 = upload(rx1.data(), rx1.size());
    void* drsa = upload(rsa.data(), rsa.size() * 4);
    DeviceTensor all(static_cast<size_t>(rows * n), out_dtype),
        mine(static_cast<size_t>(m * n), out_dtype);
    oc::DeviceMatmul r = a;
    r.m = rows;
    r.x1 = drx1;
    r.x1_scale = form_of(rank) == 2 ? nullptr : static_cast<const float*>(drsa);
    r.out = all.p;
    oc::matmul_reduce(ctx, r, true, nullptr);
    r.out = mine.p;
    oc::matmul_reduce(ctx, r, false, nullptr);
    std::vector<float> sum(static_cast<size_t>(rows * n));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        volatile float total = 0;
        for (int s = 0; s < size; ++s) {
          const std::vector<int8_t> xs = rx1_of(s), ws = x2_of(s);
          const std::vector<float> ss = rsa_of(s), bs = sb_of(s);
          volatile float scale = scale_of(s, ss, i) * bs[static_cast<size_t>(j)];
          volatile float part = static_cast<float>(acc(xs, ws, i, j)) * scale;
          total = s == 0 ? part : total + part;
        }
        if (bias >= 2) total = total + bias_f[static_cast<size_t>(j)];
        sum[static_cast<size_t>(i * n + j)] = total;
      }
    std::vector<uint8_t> sum_bytes(commfuse::dtype_storage_bytes(out_dtype, sum.size()));
    commfuse::convert(sum.data(), DType::kFloat32, sum_bytes.data(), out_dtype, sum.size());
    const std::vector<uint8_t> got = all.download();
    CHECK(got == sum_bytes, "rank %d of %d: %s matmul_all_reduce t=%d bias=%d differs", rank, size,
          mode, transposed, bias);
    const size_t bb = mine.bytes;
    CHECK(mine.download() ==
              std::vector<uint8_t>(got.begin() + static_cast<ptrdiff_t>(bb * rank),
                                   got.begin() + static_cast<ptrdiff_t>(bb * (rank + 1))),
          "rank %d of %d: %s matmul_reduce_scatter's rows differ", rank, size, mode);
    cudaFree(drx1);
    cudaFree(drsa);
  }
  for (void* p : {dx1, dx2, dsa, dsb, dbias}) cudaFree(p);
}

// sum_bias_round against the CPU's order of operations on random floats (one rank).
void sum_kernel_case(DType out_dtype, DType bias_dtype, int parts) {
  constexpr int64_t kRows = 19, kN = 77, kLd = 80;
  std::mt19937 rng(77 + parts);
  std::normal_distribution<float> dist(0.f, 3.f);
  std::vector<std::vector<float>> host(static_cast<size_t>(parts));
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  std::vector<const float*> ptrs;
  for (auto& h : host) {
    h.resize(static_cast<size_t>(kRows * kLd));
    for (auto& x : h) x = dist(rng);
    dev.push_back(std::make_unique<DeviceTensor>(h, DType::kFloat32));
    ptrs.push_back(static_cast<const float*>(dev.back()->p));
  }
  std::vector<float> bias(kN);
  for (auto& x : bias) x = dist(rng);
  // The bias as the kernel sees it: rounded to its dtype first.
  std::vector<uint8_t> bias_bytes(commfuse::dtype_storage_bytes(bias_dtype, kN));
  commfuse::convert(bias.data(), DType::kFloat32, bias_bytes.data(), bias_dtype, kN);
  commfuse::convert(bias_bytes.data(), bias_dtype, bias.data(), DType::kFloat32, kN);
  DeviceTensor dbias(bias, bias_dtype), out(static_cast<size_t>(kRows * kN), out_dtype);
  kc::SumRowsDesc d;
  d.parts = parts;
  d.part = ptrs.data();
  d.ld_part = kLd;
  d.rows = kRows;
  d.n = kN;
  d.bias = dbias.p;
  d.bias_dtype = bias_dtype;
  d.out_dtype = out_dtype;
  d.out = out.p;
  d.ld_out = kN;
  kc::sum_bias_round(d, nullptr);
  std::vector<float> want(static_cast<size_t>(kRows * kN));
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      volatile float acc = host[0][static_cast<size_t>(i * kLd + j)];  // no contraction
      for (int p = 1; p < parts; ++p)
        acc = acc + host[static_cast<size_t>(p)][static_cast<size_t>(i * kLd + j)];
      acc = acc + bias[static_cast<size_t>(j)];
      want[static_cast<size_t>(i * kN + j)] = acc;
    }
  std::vector<uint8_t> want_bytes(commfuse::dtype_storage_bytes(out_dtype, want.size()));
  commfuse::convert(want.data(), DType::kFloat32, want_bytes.data(), out_dtype, want.size());
  CHECK(out.download() == want_bytes, "sum_bias_round: %d parts, bias %s, out %s differs", parts,
        name(bias_dtype), name(out_dtype));
}

// nccl: the exchange across hosts (comm/nccl) instead of CUDA IPC, as if the ranks were on
// several hosts.
int run_rank(cudatest::Meeting& meeting, int rank, int size, bool nccl) {
  if (size == 1 && !nccl)
    for (const DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
      for (const DType b : {DType::kFloat32, DType::kBFloat16, DType::kFloat16})
        for (const int parts : {1, 3, 64}) sum_kernel_case(out, b, parts);
  // The barrier fails every rank's call when one rank rejects it (the communicator's does).
  bool reject_next = false;
  oc::HostExchange ex{[&](const std::string& s) { return meeting.all_gather(s); },
                      [&] {
                        for (const std::string& s : meeting.all_gather(reject_next ? "x" : ""))
                          if (!s.empty()) throw std::runtime_error("a rank rejected the call");
                      }};
  ex.nccl = nccl;
  // COMMFUSE_TEST_PROGRESS=1: each rank names each case before it runs (where a run hangs).
  const char* trace_env = std::getenv("COMMFUSE_TEST_PROGRESS");
  const bool trace = trace_env != nullptr && std::string(trace_env) == "1";
  auto progress = [&](const std::string& what) {
    if (trace) std::fprintf(stderr, "rank %d/%d: %s\n", rank, size, what.c_str());
  };
  {
    oc::DeviceContext ctx(rank, size, ex);
    const Case agm_cases[] = {{5, 96, 40, false, 0, true},
                              {5, 96, 40, true, 1, false, 5},
                              {3, 64, 24, false, 2, true, 8}};
    const Case reduce_cases[] = {{static_cast<int64_t>(3 * size), 96, 40, false, 0, false},
                                 {static_cast<int64_t>(2 * size), 64, 24, true, 1, false, 8},
                                 {static_cast<int64_t>(size), 64, 24, false, 2, false, 3}};
    for (const DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
      for (const unsigned seed : {1u, 2u}) {  // different data in consecutive calls
        progress(std::string("all_gather_matmul / matmul_reduce ") +
                 std::string(commfuse::dtype_name(dtype)) + " seed " + std::to_string(seed));
        for (const Case& c : agm_cases) all_gather_matmul_case(ctx, c, dtype, seed);
        for (const Case& c : reduce_cases) matmul_reduce_case(ctx, meeting, c, dtype, seed);
      }
    progress("quant_reduce");
    for (const DType out : {DType::kFloat32, DType::kBFloat16}) {
      quant_reduce_case(ctx, DType::kInt8, false, out);
      quant_reduce_case(ctx, DType::kFloat8E4M3FN, true, out);
    }
    for (const bool transposed : {false, true})
      for (const int bias : {0, 1, 2}) {
        progress("alltoall_matmul transposed " + std::to_string(transposed) + " bias " +
                 std::to_string(bias));
        alltoall_case(ctx, transposed, bias);
      }
    for (const Combo combo : {Combo::kA16W8, Combo::kA16W4, Combo::kA4W4})
      for (const bool transposed : {true, false})
        for (const int bias : {0, 1, 2}) {
          progress("alltoall_quant_matmul combo " + std::to_string(static_cast<int>(combo)) +
                   " transposed " + std::to_string(transposed) + " bias " + std::to_string(bias));
          alltoall_quant_case(ctx, combo, transposed, bias);
        }
    progress("alltoall_quant_matmul h=36");
    alltoall_quant_case(ctx, Combo::kA4W4, false, 2, 36);
    alltoall_quant_case(ctx, Combo::kA16W4, true, 0, 36);
    progress("a8w8 / hif8 / fp8");
    for (const int bias : {0, 1, 2, 3}) a8w8_case(ctx, bias, 0);
    for (const int form : {1, 2, 3}) a8w8_case(ctx, 2, form);
    // HiF8 (SPEC §6: x1 scale per tensor or absent, float biases): widened to bf16 on the GPU.
    for (const bool transposed : {true, false})
      for (const int bias : {0, 2, 3}) a8w8_case(ctx, bias, 1, DType::kHiFloat8, transposed);
    a8w8_case(ctx, 2, 2, DType::kHiFloat8, false);
    a8w8_case(ctx, 1, 0, DType::kInt8, false);  // A8W8 x2 (k, n): transposed in scratch
    a8w8_case(ctx, 3, 3, DType::kInt8, false);
    for (const bool transposed : {true, false})  // FP8 (x1 scale per tensor), sm_89+
      a8w8_case(ctx, 2, 1, DType::kFloat8E4M3FN, transposed);
    progress("order_and_precision");
    order_and_precision_case(ctx);
    progress("rejected_call");
    rejected_call_case(ctx, reject_next);
    progress("pipelined");
    pipelined_case(ctx);
    progress("heap growth, m = 0");
    // More than the first heap holds (2 MiB a half): it grows collectively.
    all_gather_matmul_case(ctx, {1100, 1024, 16, false, 1, true}, DType::kBFloat16, 3);
    matmul_reduce_case(ctx, meeting, {static_cast<int64_t>(512 * size), 64, 1024, true, 0, false},
                       DType::kBFloat16, 4);
    // m = 0: nothing to compute, the ranks still meet.
    all_gather_matmul_case(ctx, {0, 64, 8, false, 0, true}, DType::kFloat32, 5);
    matmul_reduce_case(ctx, meeting, {0, 64, 8, false, 0, false}, DType::kFloat32, 5);
    progress("teardown");
  }  // the context's collective teardown
  return cudatest::g_failures == 0 ? 0 : 1;
}

// Argument checks of the sum kernel: rejected before any device work.
void sum_kernel_rejections() {
  static const float* part[1] = {reinterpret_cast<const float*>(uintptr_t{256})};
  kc::SumRowsDesc valid;
  valid.parts = 1;
  valid.part = part;
  valid.ld_part = 8;
  valid.rows = 2;
  valid.n = 8;
  valid.out = reinterpret_cast<void*>(uintptr_t{512});
  valid.ld_out = 8;
  const cudatest::BadCase<kc::SumRowsDesc> cases[] = {
      {"no parts", [](kc::SumRowsDesc& d) { d.parts = 0; }, "parts=0"},
      {"too many parts", [](kc::SumRowsDesc& d) { d.parts = 65; }, "parts=65"},
      {"n 0", [](kc::SumRowsDesc& d) { d.n = 0; }, "n=0"},
      {"ld_part short", [](kc::SumRowsDesc& d) { d.ld_part = 7; }, "ld_part=7"},
      {"ld_out short", [](kc::SumRowsDesc& d) { d.ld_out = 7; }, "ld_out=7"},
      {"int8 out", [](kc::SumRowsDesc& d) { d.out_dtype = DType::kInt8; }, "out_dtype int8"},
      {"int32 bias",
       [](kc::SumRowsDesc& d) {
         d.bias = d.out;
         d.bias_dtype = DType::kInt32;
       },
       "bias_dtype int32"},
      {"null out", [](kc::SumRowsDesc& d) { d.out = nullptr; }, "out is null"},
      {"odd out", [](kc::SumRowsDesc& d) { d.out = reinterpret_cast<void*>(uintptr_t{513}); },
       "out is not aligned"},
  };
  cudatest::expect_rejected(valid, cases,
                            [](const kc::SumRowsDesc& d) { kc::sum_bias_round(d, nullptr); });
}

}  // namespace

// `commfuse_cuda_test_device_ops nccl`: only the NCCL exchange, at W = 1 (NCCL refuses two
// ranks on one GPU, and the GPU machines here have one; W > 1 needs several GPUs), exit 77
// where libnccl.so.2 does not load. Without the argument: CUDA IPC at W = 1, 2, 4; with a
// number W (1-4): CUDA IPC at that W only.
int main(int argc, char** argv) {
  const bool nccl = argc > 1 && std::string(argv[1]) == "nccl";
  // One digit, 1-4, or nothing (std::atoi took "2x" for 2).
  const std::string arg = argc > 1 ? argv[1] : "";
  const int only = arg.size() == 1 && arg[0] >= '1' && arg[0] <= '4' ? arg[0] - '0' : 0;
  static_assert(cudatest::kMaxRanks == 4);
  if (argc > 1 && !nccl && only == 0) {
    std::fprintf(stderr, "usage: %s [nccl | W (1-%d)]\n", argv[0], cudatest::kMaxRanks);
    return 2;
  }
  sum_kernel_rejections();
  if (cudatest::g_failures != 0) return cudatest::finish("device ops");
  if (const int probe = cudatest::probe_ipc_device(); probe != 0) return probe;
  if (nccl) {
    // Loaded in a child: the parent touches no CUDA library before forking the ranks.
    const int loads = cudatest::in_child([] {
      const std::string why = commfuse::comm::nccl::nccl_unavailable();
      if (why.empty()) return 0;
      std::printf("device ops over NCCL SKIPPED: %s\n", why.c_str());
      return 77;
    });
    if (loads != 0) return loads;
    return cudatest::run_ranks(1, [&](cudatest::Meeting& meeting,
                                      int rank) { return run_rank(meeting, rank, 1, true); }) == 0
               ? 0
               : 1;
  }
  int failed = 0;
  const std::vector<int> sizes = only != 0 ? std::vector<int>{only} : std::vector<int>{1, 2, 4};
  for (const int size : sizes)
    failed += cudatest::run_ranks(size, [&](cudatest::Meeting& meeting, int rank) {
      return run_rank(meeting, rank, size, false);
    });
  return failed == 0 ? 0 : 1;
}
