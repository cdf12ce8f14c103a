#include "ops/cuda/device_context.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/launch.hpp"

namespace commfuse::ops::cuda {
namespace {

using comm::cuda_ipc::IpcHeap;
using comm::cuda_ipc::Signal;

// The heap grows in whole 2 MiB steps (cudaMalloc's own granularity for large allocations).
constexpr size_t kHeapStep = size_t{2} << 20;

void check(cudaError_t e, int rank, const char* what) {
  kernels::cuda::check_cuda(e, what, "CUDA device context (rank ", rank, ")");
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
  try {
    nccl_mode_ = exchange_.nccl;
    check(cudaGetDevice(&device_), rank_, "cudaGetDevice");
    for (void** stream : {&copy_stream_, &comm_stream_}) {
      cudaStream_t s = nullptr;
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank_, "cudaStreamCreate");
      *stream = s;
    }
    for (void** e : {&fork_event_, &join_event_, &call_event_, &ready_event_, &gathered_event_}) {
      cudaEvent_t ev = nullptr;
      check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), rank_, "cudaEventCreate");
      *e = ev;
    }
    check(cudaMalloc(&gemm_ws_, kernels::cuda::kGemmWorkspaceBytes), rank_, "cudaMalloc");
    check(cudaMalloc(&one_, sizeof(float)), rank_, "cudaMalloc");
    const float one = 1.f;
    check(cudaMemcpy(one_, &one, sizeof one, cudaMemcpyHostToDevice), rank_, "cudaMemcpy");
  } catch (...) {
    free_local();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void DeviceContext::free_local() {
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (gemm_ws_ != nullptr) cudaFree(gemm_ws_);
  if (one_ != nullptr) cudaFree(one_);
  if (gather_buf_ != nullptr) cudaFree(gather_buf_);
  for (void* e : {fork_event_, join_event_, call_event_, ready_event_, gathered_event_})
    if (e != nullptr) cudaEventDestroy(as_event(e));
  for (void* s : {copy_stream_, comm_stream_})
    if (s != nullptr) cudaStreamDestroy(as_stream(s));
  scratch_ = gemm_ws_ = one_ = gather_buf_ = nullptr;
  fork_event_ = join_event_ = call_event_ = ready_event_ = gathered_event_ = nullptr;
  copy_stream_ = comm_stream_ = nullptr;
}

bool DeviceContext::wait_idle() {
  // Polled, not synchronized: a stream waiting for a dead peer's event never finishes.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(exchange_.timeout_s);
  for (;;) {
    const cudaError_t a = cudaEventQuery(as_event(call_event_));
    const cudaError_t b = cudaStreamQuery(as_stream(copy_stream_));
    const cudaError_t c = cudaStreamQuery(as_stream(comm_stream_));
    if (a != cudaErrorNotReady && b != cudaErrorNotReady && c != cudaErrorNotReady) {
      cudaGetLastError();
      return a == cudaSuccess && b == cudaSuccess && c == cudaSuccess;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

DeviceContext::~DeviceContext() {
  int caller_device = device_;
  cudaGetDevice(&caller_device);  // restored below: the caller's thread keeps its device
  cudaSetDevice(device_);
  if (exchange_.usable && !exchange_.usable()) {
    CF_LOG(kWarn, "CUDA device context (rank ", rank_,
           "): the communicator failed; its device memory stays allocated (a peer or queued "
           "work may still use it)");
    leak();
    cudaSetDevice(caller_device);
    return;
  }
  if (!wait_idle()) {
    CF_LOG(kWarn, "CUDA device context (rank ", rank_, "): queued work did not finish within ",
           exchange_.timeout_s, " s; its device memory stays allocated");
    leak();  // deliberately: queued work and peers may still use it
    cudaSetDevice(caller_device);
    return;
  }
  try {
    drop_heap();
  } catch (const std::exception& e) {
    // A peer that did not take part may still have reads of this heap queued.
    CF_LOG(kWarn, "CUDA device context (rank ", rank_, "): ", e.what(),
           "; its device heap stays allocated");
    leak();
  }
  nccl_.reset();  // after this rank's queued all-gathers finished (wait_idle)
  free_local();
  cudaSetDevice(caller_device);
}

void DeviceContext::leak() {
  (void)heap_.release();
  nccl_.reset();          // ncclCommAbort: local, and stops NCCL kernels waiting for a dead peer
  gather_buf_ = nullptr;  // left allocated: queued work may still use it
}

void DeviceContext::drop_heap() {
  if (nccl_mode_) {  // a local buffer: no peer maps it
    if (gather_buf_ != nullptr) check(cudaFree(gather_buf_), rank_, "cudaFree");
    gather_buf_ = nullptr;
    half_bytes_ = 0;
    return;
  }
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
  // IPC: one region per rank, mapped by the peers; NCCL: R regions, local.
  const size_t need = nccl_mode_ ? heap_align(half_bytes) * static_cast<size_t>(size_) : half_bytes;
  const size_t half = (need + kHeapStep - 1) / kHeapStep * kHeapStep;
  if (nccl_mode_) {
    if (!nccl_)  // made once, by every rank in the same call
      nccl_ = std::make_unique<comm::nccl::NcclGather>(rank_, size_, exchange_.all_gather,
                                                       exchange_.timeout_s);
    check(cudaMalloc(&gather_buf_, 2 * half), rank_, "cudaMalloc");
  } else {
    heap_ = std::make_unique<IpcHeap>(rank_, size_, 2 * half, exchange_.all_gather);
  }
  half_bytes_ = half;
  half_ = 1;
}

DeviceContext::Half DeviceContext::begin_call(size_t bytes, void* stream) {
  CF_ASSERT(bytes > 0 && phase_ == Phase::kIdle);
  const size_t capacity =
      nccl_mode_ ? half_bytes_ / static_cast<size_t>(size_) / 256 * 256 : half_bytes_;
  if (bytes > capacity) {
    exchange_.barrier();  // every rank is in this call (and agrees on its shapes) first
    phase_ = Phase::kGrowing;
    grow(bytes);
    phase_ = Phase::kIdle;
  }
  phase_ = Phase::kBegun;
  call_stream_ = stream;
  pending_ = half_ ^ 1;
  check(cudaStreamWaitEvent(as_stream(stream), as_event(call_event_), 0), rank_,
        "cudaStreamWaitEvent");
  Half h;
  h.part.resize(static_cast<size_t>(size_));
  if (nccl_mode_) {
    // No peer reads this memory: the previous call's end (which follows its all-gather)
    // orders everything before this call's writes. Regions of this call's size, so one
    // in-place all-gather fills them.
    region_ = heap_align(bytes);
    for (int r = 0; r < size_; ++r)
      h.part[static_cast<size_t>(r)] = static_cast<char*>(gather_buf_) +
                                       static_cast<size_t>(pending_) * half_bytes_ +
                                       static_cast<size_t>(r) * region_;
  } else {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) heap_->wait_for(r, Signal::kDone, stream);
    for (int r = 0; r < size_; ++r)
      h.part[static_cast<size_t>(r)] =
          static_cast<char*>(heap_->peer(r)) + static_cast<size_t>(pending_) * half_bytes_;
  }
  h.mine = h.part[static_cast<size_t>(rank_)];
  return h;
}

void DeviceContext::publish_ready(void* stream) {
  if (nccl_mode_)
    check(cudaEventRecord(as_event(ready_event_), as_stream(stream)), rank_, "cudaEventRecord");
  else
    heap_->publish(Signal::kReady, stream);
}

void DeviceContext::exchange() {
  exchange_.barrier();
  if (phase_ == Phase::kBegun) {
    half_ = pending_;  // every rank passed the barrier: the call's half is current everywhere
    phase_ = Phase::kExchanged;
    if (nccl_mode_) {  // every rank passed the barrier, so every rank queues this all-gather
      check(cudaStreamWaitEvent(as_stream(comm_stream_), as_event(ready_event_), 0), rank_,
            "cudaStreamWaitEvent");
      nccl_->all_gather(static_cast<char*>(gather_buf_) + static_cast<size_t>(half_) * half_bytes_,
                        region_, comm_stream_);
      check(cudaEventRecord(as_event(gathered_event_), as_stream(comm_stream_)), rank_,
            "cudaEventRecord");
    }
  }
}

void DeviceContext::wait_ready(int r, void* stream) {
  if (r == rank_) return;
  if (nccl_mode_)
    check(cudaStreamWaitEvent(as_stream(stream), as_event(gathered_event_), 0), rank_,
          "cudaStreamWaitEvent");
  else
    heap_->wait_for(r, Signal::kReady, stream);
}

void DeviceContext::end_call(void* stream) {
  if (nccl_mode_)  // the call ends after its all-gather, even one no reader waited for
    check(cudaStreamWaitEvent(as_stream(stream), as_event(gathered_event_), 0), rank_,
          "cudaStreamWaitEvent");
  else
    heap_->publish(Signal::kDone, stream);
  check(cudaEventRecord(as_event(call_event_), as_stream(stream)), rank_, "cudaEventRecord");
  phase_ = Phase::kIdle;
}

bool DeviceContext::cancel_call(bool failed_at_synchronization) {
  const Phase was = phase_;
  phase_ = Phase::kIdle;
  if (was == Phase::kBegun || was == Phase::kExchanged) {
    // The next call must follow what this one queued (its writes of the heap, the
    // workspace, the scratch, NCCL's all-gather); an error recording it is reported by the
    // next call's wait.
    if (nccl_mode_ && was == Phase::kExchanged &&
        cudaStreamWaitEvent(as_stream(call_stream_), as_event(gathered_event_), 0) != cudaSuccess)
      cudaGetLastError();
    if (cudaEventRecord(as_event(call_event_), as_stream(call_stream_)) != cudaSuccess)
      cudaGetLastError();
  }
  return failed_at_synchronization && (was == Phase::kIdle || was == Phase::kBegun);
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
