// The device calls' exchange between hosts (issue 17's inter-node transport): NCCL, loaded
// at run time (dlopen of libnccl.so.2, as cuBLASLt is), so libcommfuse loads where NCCL is
// not installed and only a call that needs it says so.
//
// CUDA IPC lets a rank read its peers' regions in place; across hosts each call's per-rank
// region is instead all-gathered (ncclAllGather, in place) into a local buffer of R regions,
// after which the same schedules read "rank r's region" from this rank's memory. An
// all-gather moves every rank's whole region to every rank: what all_gather_matmul,
// matmul_all_reduce and quant_all_reduce need; the reduce-scatter and all-to-all forms read
// only their block of each region, so they move R times the bytes they need (a grouped
// send/recv would not; not built).
//
// A peer that dies inside ncclAllGather leaves this rank's stream waiting: the host barrier
// before each all-gather catches a peer that never arrives (COMMFUSE_TIMEOUT_S), and the
// device context's teardown gives up on queued work after the same timeout.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace commfuse::comm::nccl {

// Which exchange CUDA device calls use: CUDA IPC for ranks on one host, NCCL otherwise,
// unless COMMFUSE_DEVICE_TRANSPORT pins one. Throws PARAM_INVALID for ipc across hosts.
// (transport_choice.cpp: in every build.)
bool device_calls_use_nccl(bool one_host);

// Empty when libnccl.so.2 loads with every entry point used; else why not.
std::string nccl_unavailable();
// "2.27.7 (libnccl.so.2)", or why it is unavailable.
std::string nccl_describe();

class NcclGather {
 public:
  // Every rank's string, in rank order; each rank passes its own (the communicator's host
  // all_gather, which fails on every rank when one rejected its call).
  using AllGather = std::function<std::vector<std::string>(const std::string&)>;

  // Collective: rank 0's ncclUniqueId reaches every rank through all_gather, then a
  // non-blocking ncclCommInitRankConfig on the current device, polled for at most
  // timeout_s. Throws RUNTIME_ERROR naming the step (a build without CUDA: PARAM_INVALID
  // "not supported").
  NcclGather(int rank, int size, const AllGather& all_gather, int timeout_s);
  ~NcclGather();  // abort()
  NcclGather(const NcclGather&) = delete;
  NcclGather& operator=(const NcclGather&) = delete;

  // Queues on `stream` (cudaStream_t): recv holds size regions of `bytes`; this rank's,
  // at recv + rank * bytes, is sent in place. First reports (RUNTIME_ERROR) an asynchronous
  // error of an earlier all-gather (a peer or the network failed).
  void all_gather(void* recv, size_t bytes, void* stream);
  // ncclCommAbort: local, never waits for peers, stops this communicator's queued and
  // running kernels. The destructor's teardown too (device_context waits for this rank's
  // queued work first where it can).
  void abort();

 private:
  int rank_;
  int timeout_s_;
  void* comm_ = nullptr;  // ncclComm_t

  // Polls the communicator until it leaves ncclInProgress (at most timeout_s); an error or
  // the deadline aborts it and throws RUNTIME_ERROR naming `what`.
  void settle(const char* what);
  void check_healthy();
};

}  // namespace commfuse::comm::nccl
