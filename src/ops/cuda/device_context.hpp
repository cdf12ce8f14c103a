// What one communicator keeps for its GPU calls (issue 17's intra-node transport): the
// symmetric device heap over CUDA IPC (comm/cuda_ipc), in two halves used by alternate
// calls, a copy stream for the copies that overlap the GEMMs, and the GEMM's workspace.
//
// One call's protocol (the ordering rules are IpcHeap's):
//   begin_call   the caller's stream waits for every peer's latest kDone (their reads of
//                the half this call writes were queued before the previous call's
//                exchange) and for this rank's previous call; the op then writes its half
//                and publishes kReady on the stream
//   exchange     the host barrier that orders every publish before every wait; only when
//                it succeeds does the call's half become the current one on every rank
//   readers      wait for a peer's kReady, read its half in place, and end_call records
//                kDone (after every read) and the call's end
// Halves alternate, so a call waits only for the readers of two calls ago (and, when a
// peer already recorded it, the previous call's kDone, which follows them in its stream).
// A reader slower than its owner may bind its wait to the owner's next kReady: later in
// the owner's stream, so still after the data it reads, and the other half is written then.
// One host barrier per call (plus the set-up exchanges when the heap grows).
//
// The first call, a call that grows the heap and a call that grows the scratch block the
// host until this rank's queued work has finished; other calls return once queued.
//
// Ranks on several hosts (or COMMFUSE_DEVICE_TRANSPORT=nccl) use NCCL instead of the IPC heap
// (comm/nccl): the call's regions live in a local buffer of R regions per half, this rank's
// written in place; exchange() queues an in-place ncclAllGather of them on a communication
// stream after the barrier, and wait_ready() waits for it, so the schedules run unchanged.
//
// Needs no communicator: the host exchanges are functions (the communicator's all_gather and
// barrier in the product; a shared-memory board in scripts/gpu-check.sh's tests).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "comm/cuda_ipc/ipc_heap.hpp"
#include "comm/nccl/nccl_gather.hpp"

namespace commfuse::ops::cuda {

// Offsets inside a call's region (and scratch pieces) start 256-byte aligned, as the heap's
// halves do: what cuBLASLt's fastest kernels and vector loads want.
inline constexpr size_t heap_align(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

struct HostExchange {
  comm::cuda_ipc::IpcHeap::AllGather all_gather;  // set-up: every rank's bytes, rank order
  std::function<void()> barrier;                  // per call
  int timeout_s = 300;  // teardown: how long to wait for this rank's queued work
  // Teardown: false once the peers cannot be reached (an aborted or failed communicator):
  // then nothing is waited for and the device memory is left allocated. Empty: reachable.
  std::function<bool()> usable = nullptr;
  // The exchange: NCCL (ranks across hosts) instead of the CUDA IPC heap, as the plans chose
  // it (comm/nccl's device_calls_use_nccl).
  bool nccl = false;
};

class DeviceContext {
 public:
  // On the current CUDA device. Collective only when the heap is first needed.
  DeviceContext(int rank, int size, HostExchange exchange);
  // Waits (up to the exchange's timeout) for this rank's queued work, then tears the heap
  // down collectively (IpcHeap's teardown). If the work does not finish (a stream waiting
  // for a dead peer) or the exchange fails, the device memory is left allocated (logged):
  // a peer may still read this heap, and freeing memory under queued work is not safe.
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  bool nccl_mode() const { return nccl_mode_; }  // the exchange is NCCL's (else CUDA IPC)

  // One call's half of the heap: this rank's part and every rank's, as this process maps them.
  struct Half {
    void* mine = nullptr;
    std::vector<void*> part;  // part[r]: rank r's half (part[rank] == mine)
  };
  // Starts a call that puts `bytes` per rank into the heap: grows the heap if needed
  // (collective: every rank of a call asks for the same bytes), and makes `stream`
  // (cudaStream_t) wait until no peer still reads the half this call writes and until this
  // rank's previous call has finished (calls on one communicator run in order, whichever
  // streams they are queued on: they share the workspace and scratch).
  Half begin_call(size_t bytes, void* stream);
  // After this rank's writes to its half are queued on `stream`.
  void publish_ready(void* stream);
  // The host barrier between publishing and waiting (also alone: a call with nothing to
  // move still synchronizes).
  void exchange();
  // `stream` waits for rank r's kReady of this call.
  void wait_ready(int r, void* stream);
  // Ends the call, after every read of the peers' halves and every use of the workspace and
  // scratch is queued on `stream`.
  void end_call(void* stream);
  // After an exception inside a call: true when the ranks are still in step — the call
  // failed at its first synchronization (a peer rejected it, or the ranks disagree), which
  // every rank learns alike, so no rank switched halves; this rank's queued work is chained
  // so the next call follows it. False: the protocol stopped midway and the communicator
  // must be aborted.
  bool cancel_call(bool failed_at_synchronization);

  // The copy stream (cudaStream_t), and two events to fork it from / join it to a stream.
  void* copy_stream() const { return copy_stream_; }
  void fork_copies(void* from_stream);  // copy stream waits for from_stream's work so far
  void join_copies(void* to_stream);    // to_stream waits for the copy stream's work so far

  // The GEMM's workspace (kernels/cuda kGemmWorkspaceBytes), and fp32 scratch of at least
  // `bytes` owned by this rank alone (grown after `stream` finished with the old one).
  void* gemm_workspace() const { return gemm_ws_; }
  // A device float 1.0f: the scale of an absent SPEC §6 scale.
  const float* one() const { return static_cast<const float*>(one_); }
  float* scratch(size_t bytes, void* stream);

 private:
  enum class Phase { kIdle, kGrowing, kBegun, kExchanged };

  int rank_, size_, device_ = 0;
  HostExchange exchange_;
  std::unique_ptr<comm::cuda_ipc::IpcHeap> heap_;
  size_t half_bytes_ = 0;  // each half of every rank's heap (NCCL: of the local buffer)
  // NCCL (across hosts): the communicator, the local buffer (two halves of R regions), the
  // call's region stride, the stream the all-gathers run on, and events ordering it.
  bool nccl_mode_ = false;
  std::unique_ptr<comm::nccl::NcclGather> nccl_;
  void* gather_buf_ = nullptr;
  size_t region_ = 0;
  void* comm_stream_ = nullptr;
  void* ready_event_ = nullptr;
  void* gathered_event_ = nullptr;
  int half_ = 1;     // the last exchanged call's half (the first call takes half 0)
  int pending_ = 0;  // the half of the call begun, until its exchange
  Phase phase_ = Phase::kIdle;
  void* call_stream_ = nullptr;  // the stream of the call begun
  void* copy_stream_ = nullptr;
  void* fork_event_ = nullptr;
  void* join_event_ = nullptr;
  void* call_event_ = nullptr;  // the end of this rank's latest call
  void* gemm_ws_ = nullptr;
  void* one_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;

  void grow(size_t half_bytes);  // collective
  void drop_heap();              // collective: IpcHeap's teardown
  void leak();                   // a teardown that cannot wait: device memory left allocated
  bool wait_idle();              // this rank's queued work finished within the timeout
  void free_local();             // streams, events, workspace, scratch
};

}  // namespace commfuse::ops::cuda
