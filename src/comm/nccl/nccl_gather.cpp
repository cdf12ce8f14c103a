#include "comm/nccl/nccl_gather.hpp"

#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "comm/interrupt.hpp"
#include "core/error.hpp"
#include "core/shared_library.hpp"

namespace commfuse::comm::nccl {
namespace {

// The entry points used, resolved from the library at run time.
struct Api {
  std::string name, unavailable;
  decltype(&ncclGetVersion) version = nullptr;
  decltype(&ncclGetUniqueId) unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) init = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

Api load() {
  Api api;
  // By soname (the loader's path and cache), then in the toolkit this was built with.
  SharedLibrary lib{"libnccl.so.2", COMMFUSE_CUDA_LIBDIR "/libnccl.so.2"};
  (void)(lib.resolve(api.version, "ncclGetVersion") &&
         lib.resolve(api.unique_id, "ncclGetUniqueId") &&
         lib.resolve(api.init, "ncclCommInitRankConfig") &&
         lib.resolve(api.async_error, "ncclCommGetAsyncError") &&
         lib.resolve(api.all_gather, "ncclAllGather") && lib.resolve(api.abort, "ncclCommAbort") &&
         lib.resolve(api.error_string, "ncclGetErrorString"));
  api.name = lib.name();
  api.unavailable = lib.unavailable();
  return api;
}

Api& api() {
  static Api a = load();
  return a;
}

void check(ncclResult_t r, int rank, const char* what) {
  if (r == ncclSuccess) return;
  detail::throw_status(Status::kRuntimeError, detail::cat("NCCL (rank ", rank, "): ", what,
                                                          " failed: ", api().error_string(r), " (",
                                                          static_cast<int>(r), ")"));
}

}  // namespace

std::string nccl_unavailable() {
  return api().unavailable;
}

std::string nccl_describe() {
  Api& a = api();
  if (!a.unavailable.empty()) return a.unavailable;
  int v = 0;
  if (a.version(&v) != ncclSuccess) return detail::cat(a.name, ": ncclGetVersion failed");
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9.
  return detail::cat(v / 10000, ".", (v / 100) % 100, ".", v % 100, " (", a.name, ")");
}

NcclGather::NcclGather(int rank, int size, const AllGather& all_gather, int timeout_s)
    : rank_(rank), timeout_s_(timeout_s) {
  Api& a = api();
  if (!a.unavailable.empty())
    detail::throw_status(Status::kRuntimeError,
                         detail::cat("NCCL (rank ", rank, "): ", a.unavailable));
  ncclUniqueId id{};
  if (rank == 0) check(a.unique_id(&id), rank, "ncclGetUniqueId");
  const std::vector<std::string> ids =
      all_gather(rank == 0 ? std::string(id.internal, sizeof id.internal) : std::string());
  CF_CHECK_ARG(ids.size() == static_cast<size_t>(size) && ids[0].size() == sizeof id.internal,
               "NCCL (rank ", rank, "): rank 0's unique id did not arrive whole");
  std::memcpy(id.internal, ids[0].data(), sizeof id.internal);
  // Non-blocking: a peer that fails its own initialization must not hold this rank in
  // ncclCommInitRank forever; the state is polled against the deadline instead.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = a.init(&comm, size, id, rank, &config);
  comm_ = comm;
  if (r != ncclInProgress) {
    if (r != ncclSuccess) abort();
    check(r, rank, "ncclCommInitRankConfig");
  }
  settle("ncclCommInitRankConfig");
}

NcclGather::~NcclGather() {
  abort();
}

void NcclGather::abort() {
  // Local (never waits for the peers), and stops queued or running NCCL kernels: a
  // teardown after a peer died must not hang, nor leave a kernel spinning on the GPU.
  if (comm_ != nullptr) (void)api().abort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
}

void NcclGather::settle(const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
  InterruptPoll interrupt;  // Ctrl-C (the host's check), as every other wait for the peers
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = api().async_error(static_cast<ncclComm_t>(comm_), &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclInProgress) {
      if (state != ncclSuccess) abort();
      check(state, rank_, what);
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      detail::throw_status(Status::kRuntimeError,
                           detail::cat("NCCL (rank ", rank_, "): ", what, " did not finish within ",
                                       timeout_s_, " s (a peer did not take part?)"));
    }
    if (const std::string why = interrupt.poll(); !why.empty()) {
      abort();
      detail::throw_status(
          Status::kRuntimeError,
          detail::cat("NCCL (rank ", rank_,
                      "): ", interrupted_message(why, detail::cat("waiting for ", what))));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void NcclGather::check_healthy() {
  if (comm_ == nullptr)
    detail::throw_status(Status::kRuntimeError,
                         detail::cat("NCCL (rank ", rank_, "): the communicator was aborted"));
  settle("an earlier NCCL operation");  // an asynchronous (network) error surfaces here
}

void NcclGather::all_gather(void* recv, size_t bytes, void* stream) {
  check_healthy();
  void* mine = static_cast<char*>(recv) + static_cast<size_t>(rank_) * bytes;
  const ncclResult_t r =
      api().all_gather(mine, recv, bytes, ncclUint8, static_cast<ncclComm_t>(comm_),
                       static_cast<cudaStream_t>(stream));
  if (r != ncclSuccess && r != ncclInProgress) abort();
  check(r == ncclInProgress ? ncclSuccess : r, rank_, "ncclAllGather");
  if (r == ncclInProgress) settle("ncclAllGather");  // the enqueue, not the transfer
}

}  // namespace commfuse::comm::nccl
