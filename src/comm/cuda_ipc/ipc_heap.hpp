// A symmetric device heap over CUDA IPC (issue 17's intra-node transport, its memory part):
// every rank of a host allocates the same number of bytes on its device, exports the
// allocation's IPC handle, and maps every peer's, so a kernel or copy on this rank reads (or
// writes) any peer's heap in place — between processes on different GPUs (peer access) and
// between processes sharing one GPU (the machines lent here have one H200).
//
// Readiness crosses processes through two interprocess events per rank (Signal): the owner
// records kReady after its writes to its heap, a reader records kDone after its reads of the
// peers' heaps, and a stream waits for a peer's signal with wait_for. A wait refers to the
// latest recording at the time it is enqueued, so the caller orders them with a host
// exchange: the owner publishes, then all ranks exchange (all_gather), then readers wait. A
// reader slower than the owner may bind its wait to the owner's next recording: later in
// the owner's stream, so the data is there, provided the owner's next writes leave what the
// reader reads alone (ops/cuda/device_context alternates halves of the heap for that). Before
// the owner overwrites data, it waits for every reader's kDone recorded after those reads (a
// later kDone of the same reader follows them in that reader's stream, so it is as safe).
// The exchange is the caller's (the communicator's all_gather in the product), given as a
// function, so this class depends on no transport.
//
// Teardown, as CUDA requires (an exporter must not free memory a peer still has mapped):
// every rank close_peers(), then a host exchange, then the destructors free the heaps.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace commfuse::comm::cuda_ipc {

// The two readiness signals of every rank (one interprocess event each).
enum class Signal : int { kReady = 0, kDone = 1 };
inline constexpr int kSignals = 2;

class IpcHeap {
 public:
  // Every rank's string, in rank order; each rank passes its own.
  using AllGather = std::function<std::vector<std::string>(const std::string&)>;

  // Collective over the `size` ranks: allocates `bytes` on the current device, exchanges the
  // handles, maps every peer's heap. Throws RUNTIME_ERROR naming the step and peer.
  IpcHeap(int rank, int size, size_t bytes, const AllGather& all_gather);
  // Frees this rank's heap and event (and closes any peer mapping still open): only after
  // every peer has called close_peers() (see Teardown above).
  ~IpcHeap();
  IpcHeap(const IpcHeap&) = delete;
  IpcHeap& operator=(const IpcHeap&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t bytes() const { return bytes_; }
  void* local() const { return ptrs_[static_cast<size_t>(rank_)]; }
  // Rank r's heap as this process addresses it (r == rank(): local()).
  void* peer(int r) const;

  // Records this rank's signal on `stream` (a cudaStream_t): kReady after its writes to
  // local(), kDone after its reads of the peers' heaps.
  void publish(Signal s, void* stream);
  // Makes `stream` wait for rank r's latest recording of s (see the ordering rule above).
  void wait_for(int r, Signal s, void* stream);
  // Unmaps the peers' heaps and drops their events (after this rank's reads have finished).
  void close_peers();

 private:
  int rank_, size_;
  size_t bytes_;
  std::vector<void*> ptrs_;  // every rank's heap in this process's address space
  // cudaEvent_t, kSignals per rank (rank r's signal s at r * kSignals + s): this rank's own
  // and the opened peers'
  std::vector<void*> events_;

  static size_t slot(int r, int s) { return static_cast<size_t>(r) * kSignals + s; }
  void open_all(const AllGather& all_gather);  // the constructor's work
  void destroy_events(int r);                  // rank r's events (own or opened)
  void release();                              // everything acquired so far
};

}  // namespace commfuse::comm::cuda_ipc
