// The CUDA IPC heap (comm/cuda_ipc/ipc_heap.hpp) with W = 1, 2 and 4 ranks as separate
// processes sharing the GPU, as the GPU machines lent here have one: each rank fills its
// heap with its quantized block, publishes, and after a host exchange every rank
//  - copies every peer's codes out of the peer's heap (all_gather's data path) and checks the
//    bytes, and
//  - runs quant_all_reduce's dequant_sum over all ranks' blocks read in place, checked bit for
//    bit against the CPU kernel over the same data (NaN payloads excepted).
// The ranks are separate processes meeting on a shared board (ranks.hpp).
// Exit status: 0 passed, 1 failed, 77 skipped (no usable device; COMMFUSE_REQUIRE_GPU=1: 1).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "comm/cuda_ipc/ipc_heap.hpp"
#include "kernels/cpu/dequant.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "ranks.hpp"

using commfuse::DType;
using cudatest::ok;
namespace cuda = commfuse::kernels::cuda;
namespace cpu = commfuse::kernels::cpu;

namespace {

constexpr int64_t kRows = 37, kH = 1024;  // MX e4m3fn: 1024 codes, 32 scale bytes a row
constexpr int64_t kScaleRow = kH / 32;

// Rank r's block: codes over every e4m3fn code (NaNs included) and scale bytes.
void make_block(int r, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales) {
  std::mt19937 rng(1000 + static_cast<unsigned>(r));
  codes.resize(static_cast<size_t>(kRows * kH));
  scales.resize(static_cast<size_t>(kRows * kScaleRow));
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  for (auto& s : scales) s = static_cast<uint8_t>(115 + rng() % 25);
}

bool is_nan_f32(uint32_t b) {
  return (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu) != 0;
}

int run_rank(cudatest::Meeting& meeting, int rank, int size) {
  auto all_gather = [&](const std::string& s) { return meeting.all_gather(s); };
  const size_t codes_bytes = static_cast<size_t>(kRows * kH);
  const size_t scales_at = (codes_bytes + 255) / 256 * 256;
  commfuse::comm::cuda_ipc::IpcHeap heap(
      rank, size, scales_at + static_cast<size_t>(kRows * kScaleRow), all_gather);
  std::vector<std::vector<uint8_t>> codes(size), scales(size);
  for (int r = 0; r < size; ++r) make_block(r, codes[r], scales[r]);
  auto* local = static_cast<uint8_t*>(heap.local());
  ok(cudaMemcpy(local, codes[rank].data(), codes_bytes, cudaMemcpyHostToDevice), "fill codes");
  ok(cudaMemcpy(local + scales_at, scales[rank].data(), scales[rank].size(),
                cudaMemcpyHostToDevice),
     "fill scales");
  heap.publish(commfuse::comm::cuda_ipc::Signal::kReady, nullptr);
  all_gather("published");
  for (int r = 0; r < size; ++r)
    heap.wait_for(r, commfuse::comm::cuda_ipc::Signal::kReady, nullptr);

  // The peers' codes, copied out of their heaps.
  uint8_t* gathered = nullptr;
  ok(cudaMalloc(&gathered, codes_bytes * size), "cudaMalloc");
  for (int r = 0; r < size; ++r)
    ok(cudaMemcpyAsync(gathered + codes_bytes * r, heap.peer(r), codes_bytes,
                       cudaMemcpyDeviceToDevice, nullptr),
       "copy from a peer's heap");
  std::vector<uint8_t> got(codes_bytes * size);
  ok(cudaMemcpy(got.data(), gathered, got.size(), cudaMemcpyDeviceToHost), "copy back");
  for (int r = 0; r < size; ++r)
    CHECK(std::memcmp(got.data() + codes_bytes * r, codes[r].data(), codes_bytes) == 0,
          "rank %d of %d: rank %d's codes copied from its heap differ", rank, size, r);

  // dequant_sum over every rank's block in place, against the CPU kernel.
  std::vector<const uint8_t*> pc(size), ps(size);
  for (int r = 0; r < size; ++r) {
    pc[r] = static_cast<const uint8_t*>(heap.peer(r));
    ps[r] = static_cast<const uint8_t*>(heap.peer(r)) + scales_at;
  }
  float* out = nullptr;
  ok(cudaMalloc(&out, static_cast<size_t>(kRows * kH) * 4), "cudaMalloc");
  cuda::DequantSumDesc d;
  d.x_dtype = DType::kFloat8E4M3FN;
  d.mx = true;
  d.ranks = size;
  d.codes = pc.data();
  d.scales = ps.data();
  d.rows = kRows;
  d.h = kH;
  d.codes_row_bytes = kH;
  d.scales_row_bytes = kScaleRow;
  d.out_dtype = DType::kFloat32;
  d.out = out;
  std::string msg;
  CHECK(cudatest::status_of([&] { cuda::dequant_sum(d, nullptr); }, &msg) ==
            commfuse::Status::kSuccess,
        "rank %d: dequant_sum threw %s", rank, msg.c_str());
  std::vector<float> sum(static_cast<size_t>(kRows * kH)), want(sum.size());
  ok(cudaMemcpy(sum.data(), out, sum.size() * 4, cudaMemcpyDeviceToHost), "copy back");
  for (int64_t i = 0; i < kRows; ++i)
    for (int r = 0; r < size; ++r)
      cpu::dequant_accumulate_row(DType::kFloat8E4M3FN, cpu::ScaleKind::kMx32,
                                  codes[r].data() + i * kH, scales[r].data() + i * kScaleRow, kH,
                                  want.data() + i * kH, r == 0);
  for (size_t e = 0; e < sum.size(); ++e) {
    uint32_t g, w;
    std::memcpy(&g, &sum[e], 4);
    std::memcpy(&w, &want[e], 4);
    if (g == w || (is_nan_f32(g) && is_nan_f32(w))) continue;
    CHECK(false, "rank %d of %d: element %zu is 0x%x, the CPU kernel's 0x%x", rank, size, e, g, w);
    break;
  }
  ok(cudaDeviceSynchronize(), "synchronize");
  // Teardown as CUDA requires: every rank unmaps its peers before any exporter frees.
  heap.close_peers();
  all_gather("closed");
  cudaFree(gathered);
  cudaFree(out);
  return cudatest::g_failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  if (const int probe = cudatest::probe_ipc_device(); probe != 0) return probe;
  int failed = 0;
  for (const int size : {1, 2, 4})
    failed += cudatest::run_ranks(
        size, [&](cudatest::Meeting& meeting, int rank) { return run_rank(meeting, rank, size); });
  return failed == 0 ? 0 : 1;
}
