#include "comm/cuda_ipc/ipc_heap.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>

#include "core/error.hpp"
#include "kernels/cuda/launch.hpp"

namespace commfuse::comm::cuda_ipc {
namespace {

// What a rank tells its peers: its heap's and events' handles, and which process it is (a
// random token: pids repeat across PID namespaces).
struct Record {
  cudaIpcMemHandle_t mem;
  cudaIpcEventHandle_t events[kSignals];
  int device;
  uint64_t process;
};

uint64_t process_token() {
  static const uint64_t token = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }();
  return token;
}

void check(cudaError_t e, int rank, const char* what, int peer = -1) {
  if (e == cudaSuccess) return;
  const std::string step = peer >= 0 ? detail::cat(what, " of rank ", peer) : std::string(what);
  kernels::cuda::check_cuda(e, step.c_str(), "CUDA IPC heap (rank ", rank, ")");
}

}  // namespace

IpcHeap::IpcHeap(int rank, int size, size_t bytes, const AllGather& all_gather)
    : rank_(rank),
      size_(size),
      bytes_(bytes),
      ptrs_(static_cast<size_t>(size), nullptr),
      events_(static_cast<size_t>(size) * kSignals, nullptr) {
  CF_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "CUDA IPC heap: rank ", rank, " of size ",
               size);
  CF_CHECK_ARG(bytes > 0, "CUDA IPC heap: bytes must be positive");
  try {
    open_all(all_gather);
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void IpcHeap::open_all(const AllGather& all_gather) {
  const int rank = rank_, size = size_;
  Record mine{};
  check(cudaGetDevice(&mine.device), rank, "cudaGetDevice");
  mine.process = process_token();
  check(cudaMalloc(&ptrs_[static_cast<size_t>(rank)], bytes_), rank, "cudaMalloc");
  check(cudaIpcGetMemHandle(&mine.mem, local()), rank, "cudaIpcGetMemHandle");
  for (int s = 0; s < kSignals; ++s) {
    cudaEvent_t ev = nullptr;
    check(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming), rank,
          "cudaEventCreateWithFlags");
    events_[slot(rank, s)] = ev;
    check(cudaIpcGetEventHandle(&mine.events[s], ev), rank, "cudaIpcGetEventHandle");
  }
  const std::vector<std::string> all =
      all_gather(std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
  if (static_cast<int>(all.size()) != size)
    detail::throw_status(Status::kRuntimeError,
                         detail::cat("CUDA IPC heap (rank ", rank, "): the exchange returned ",
                                     all.size(), " records for ", size, " ranks"));
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    if (all[static_cast<size_t>(r)].size() != sizeof(Record))
      detail::throw_status(
          Status::kRuntimeError,
          detail::cat("CUDA IPC heap (rank ", rank, "): rank ", r, "'s record is malformed"));
    Record peer{};
    std::memcpy(&peer, all[static_cast<size_t>(r)].data(), sizeof peer);
    // A handle cannot be opened by the process that exported it: one process per rank.
    if (peer.process == mine.process)
      detail::throw_status(Status::kRuntimeError,
                           detail::cat("CUDA IPC heap (rank ", rank, "): rank ", r,
                                       " is the same process; each rank needs its own process"));
    check(cudaIpcOpenMemHandle(&ptrs_[static_cast<size_t>(r)], peer.mem,
                               cudaIpcMemLazyEnablePeerAccess),
          rank, "cudaIpcOpenMemHandle", r);
    for (int s = 0; s < kSignals; ++s) {
      cudaEvent_t pev = nullptr;
      check(cudaIpcOpenEventHandle(&pev, peer.events[s]), rank, "cudaIpcOpenEventHandle", r);
      events_[slot(r, s)] = pev;
    }
  }
}

IpcHeap::~IpcHeap() {
  release();
}

void IpcHeap::destroy_events(int r) {
  for (int s = 0; s < kSignals; ++s) {
    void*& ev = events_[slot(r, s)];
    if (ev != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
    ev = nullptr;
  }
}

void IpcHeap::close_peers() {
  for (int r = 0; r < size_; ++r) {
    const auto i = static_cast<size_t>(r);
    if (r == rank_) continue;
    destroy_events(r);
    if (ptrs_[i] != nullptr) cudaIpcCloseMemHandle(ptrs_[i]);
    ptrs_[i] = nullptr;
  }
}

void IpcHeap::release() {
  close_peers();
  const auto i = static_cast<size_t>(rank_);
  destroy_events(rank_);
  if (ptrs_[i] != nullptr) cudaFree(ptrs_[i]);
  ptrs_[i] = nullptr;
}

void* IpcHeap::peer(int r) const {
  CF_ASSERT(r >= 0 && r < size_);
  return ptrs_[static_cast<size_t>(r)];
}

void IpcHeap::publish(Signal s, void* stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(events_[slot(rank_, static_cast<int>(s))]),
                        static_cast<cudaStream_t>(stream)),
        rank_, "cudaEventRecord");
}

void IpcHeap::wait_for(int r, Signal s, void* stream) {
  CF_ASSERT(r >= 0 && r < size_);
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                            static_cast<cudaEvent_t>(events_[slot(r, static_cast<int>(s))]), 0),
        rank_, "cudaStreamWaitEvent", r);
}

}  // namespace commfuse::comm::cuda_ipc
