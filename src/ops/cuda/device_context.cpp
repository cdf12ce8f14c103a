#include "ops/cuda/device_context.hpp"

#include <cuda_runtime_api.h>

#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/cuda/blaslt.hpp"

namespace commfuse::ops::cuda {
namespace {

using comm::cuda_ipc::IpcHeap;
using comm::cuda_ipc::Signal;

// The heap grows in whole 2 MiB steps (cudaMalloc's own granularity for large allocations).
constexpr size_t kHeapStep = size_t{2} << 20;

void check(cudaError_t e, int rank, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // a failed call must not poison the next one's check
  detail::throw_status(Status::kRuntimeError,
                       detail::cat("CUDA device context (rank ", rank, "): ", what,
                                   " failed: ", cudaGetErrorString(e)));
}

cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}
cudaEvent_t as_event(void* e) {
  return static_cast<cudaEvent_t>(e);
}

}  // namespace

DeviceContext::DeviceContext(int rank, int size, HostExchange exchange)
    : rank_(rank), size_(size), exchange_(std::move(exchange)) {
  check(cudaGetDevice(&device_), rank_, "cudaGetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank_, "cudaStreamCreate");
  copy_stream_ = s;
  for (void** e : {&fork_event_, &join_event_, &call_event_}) {
    cudaEvent_t ev = nullptr;
    check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), rank_, "cudaEventCreate");
    *e = ev;
  }
  check(cudaMalloc(&gemm_ws_, kernels::cuda::kGemmWorkspaceBytes), rank_, "cudaMalloc");
}

DeviceContext::~DeviceContext() {
  cudaSetDevice(device_);
  cudaDeviceSynchronize();  // this rank's queued reads and writes of the heap are finished
  try {
    drop_heap();
  } catch (const std::exception& e) {
    // A peer that cannot be reached cannot be reading this heap any more.
    CF_LOG(kWarn, "CUDA device context (rank ", rank_, "): ", e.what(),
           "; freeing the heap without the peers");
    heap_.reset();
  }
  cudaFree(scratch_);
  cudaFree(gemm_ws_);
  cudaEventDestroy(as_event(fork_event_));
  cudaEventDestroy(as_event(join_event_));
  cudaEventDestroy(as_event(call_event_));
  cudaStreamDestroy(as_stream(copy_stream_));
}

void DeviceContext::drop_heap() {
  if (!heap_) return;
  heap_->close_peers();
  exchange_.barrier();  // every rank closed its mappings: the owners may free
  heap_.reset();
  half_bytes_ = 0;
}

void DeviceContext::grow(size_t half_bytes) {
  // The old heap goes only after every rank's queued work on it (reads of peers included)
  // has finished: this rank's here, the peers' before they reach drop_heap's barrier.
  check(cudaDeviceSynchronize(), rank_, "cudaDeviceSynchronize");
  drop_heap();
  const size_t half = (half_bytes + kHeapStep - 1) / kHeapStep * kHeapStep;
  heap_ = std::make_unique<IpcHeap>(rank_, size_, 2 * half, exchange_.all_gather);
  half_bytes_ = half;
  half_ = 1;
}

DeviceContext::Half DeviceContext::begin_call(size_t bytes, void* stream) {
  CF_ASSERT(bytes > 0);
  if (bytes > half_bytes_) {
    exchange_.barrier();  // every rank is in this call (and agrees on its shapes) first
    grow(bytes);
  }
  half_ ^= 1;
  check(cudaStreamWaitEvent(as_stream(stream), as_event(call_event_), 0), rank_,
        "cudaStreamWaitEvent");
  for (int r = 0; r < size_; ++r)
    if (r != rank_) heap_->wait_for(r, Signal::kDone, stream);
  Half h;
  h.part.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r)
    h.part[static_cast<size_t>(r)] =
        static_cast<char*>(heap_->peer(r)) + static_cast<size_t>(half_) * half_bytes_;
  h.mine = h.part[static_cast<size_t>(rank_)];
  return h;
}

void DeviceContext::publish_ready(void* stream) {
  heap_->publish(Signal::kReady, stream);
}

void DeviceContext::exchange() {
  exchange_.barrier();
}

void DeviceContext::wait_ready(int r, void* stream) {
  if (r != rank_) heap_->wait_for(r, Signal::kReady, stream);
}

void DeviceContext::end_call(void* stream) {
  heap_->publish(Signal::kDone, stream);
  check(cudaEventRecord(as_event(call_event_), as_stream(stream)), rank_, "cudaEventRecord");
}

void DeviceContext::fork_copies(void* from_stream) {
  check(cudaEventRecord(as_event(fork_event_), as_stream(from_stream)), rank_, "cudaEventRecord");
  check(cudaStreamWaitEvent(as_stream(copy_stream_), as_event(fork_event_), 0), rank_,
        "cudaStreamWaitEvent");
}

void DeviceContext::join_copies(void* to_stream) {
  check(cudaEventRecord(as_event(join_event_), as_stream(copy_stream_)), rank_, "cudaEventRecord");
  check(cudaStreamWaitEvent(as_stream(to_stream), as_event(join_event_), 0), rank_,
        "cudaStreamWaitEvent");
}

float* DeviceContext::scratch(size_t bytes, void* stream) {
  if (bytes > scratch_bytes_) {
    // Queued kernels (this call's stream waits for the previous call's) may still use it.
    check(cudaStreamSynchronize(as_stream(stream)), rank_, "cudaStreamSynchronize");
    check(cudaFree(scratch_), rank_, "cudaFree");
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    check(cudaMalloc(&scratch_, bytes), rank_, "cudaMalloc");
    scratch_bytes_ = bytes;
  }
  return static_cast<float*>(scratch_);
}

}  // namespace commfuse::ops::cuda
