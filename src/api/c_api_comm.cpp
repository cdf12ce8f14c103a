// C entry points for communicators and collectives.
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <cstring>
#include <memory>

#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "api/held_comms.hpp"
#include "core/error.hpp"

namespace {

using commfuse::api::guarded;

constexpr const char* kMadeBy = "commfuseCommInitRank or commfuseCommInitFromEnv";

// The handles' table (c_api_handles.hpp); the C type commfuseComm is never defined.
commfuse::api::HandleTable<commfuse::Comm>& comms() {
  static auto* const table = new commfuse::api::HandleTable<commfuse::Comm>;
  return *table;
}

// Shared: a destroy from another thread cannot free the communicator under a call on it.
std::shared_ptr<commfuse::Comm> get(commfuseComm_t c, const char* fn) {
  return commfuse::api::live_handle(comms(), c, fn, "comm", "communicator", kMadeBy);
}

commfuse::DType dt(commfuseDataType t) {
  return static_cast<commfuse::DType>(t);
}

}  // namespace

extern "C" {

commfuseStatus_t commfuseCommInitRank(int rank, int worldSize, const char* initMethod,
                                      commfuseComm_t* comm) {
  return guarded("commfuseCommInitRank", [&] {
    CF_CHECK_NOTNULL(comm, "commfuseCommInitRank: comm (output) is null");
    CF_CHECK_NOTNULL(initMethod, "commfuseCommInitRank: initMethod is null");
    *comm = nullptr;
    const auto made = std::make_shared<commfuse::Comm>(rank, worldSize, initMethod);
    commfuse::api::register_held_comm(made);
    *comm = comms().add<commfuseComm>(made);
  });
}

commfuseStatus_t commfuseCommInitFromEnv(commfuseComm_t* comm) {
  return guarded("commfuseCommInitFromEnv", [&] {
    CF_CHECK_NOTNULL(comm, "commfuseCommInitFromEnv: comm (output) is null");
    *comm = nullptr;
    const auto made = std::shared_ptr<commfuse::Comm>(commfuse::Comm::from_env());
    commfuse::api::register_held_comm(made);
    *comm = comms().add<commfuseComm>(made);
  });
}

commfuseStatus_t commfuseCommDestroy(commfuseComm_t comm) {
  // The communicator goes when the last call on it (another thread's: a collective holds
  // its handle's, an operator its group's, held_comms.hpp) returns.
  return guarded("commfuseCommDestroy", [&] {
    const auto last = commfuse::api::destroy_handle(comms(), comm, "commfuseCommDestroy", "comm",
                                                    "communicator", kMadeBy);
    if (last != nullptr) commfuse::api::forget_held_comm(last->name());
  });
}

commfuseStatus_t commfuseCommGetName(commfuseComm_t comm, char* name) {
  return guarded("commfuseCommGetName", [&] {
    CF_CHECK_NOTNULL(name, "commfuseCommGetName: name is null");
    const auto c = get(comm, "commfuseCommGetName");
    const std::string& n = c->name();
    CF_ASSERT(n.size() < COMMFUSE_COMM_NAME_MAX);
    std::memcpy(name, n.c_str(), n.size() + 1);
  });
}

commfuseStatus_t commfuseCommRank(commfuseComm_t comm, int* rank) {
  return guarded("commfuseCommRank", [&] {
    CF_CHECK_NOTNULL(rank, "commfuseCommRank: rank is null");
    *rank = get(comm, "commfuseCommRank")->rank();
  });
}

commfuseStatus_t commfuseCommSize(commfuseComm_t comm, int* worldSize) {
  return guarded("commfuseCommSize", [&] {
    CF_CHECK_NOTNULL(worldSize, "commfuseCommSize: worldSize is null");
    *worldSize = get(comm, "commfuseCommSize")->world_size();
  });
}

commfuseStatus_t commfuseCommIsUsable(commfuseComm_t comm, int* usable) {
  return guarded("commfuseCommIsUsable", [&] {
    CF_CHECK_NOTNULL(usable, "commfuseCommIsUsable: usable is null");
    // One reading: an abort from another thread may come between two.
    const std::string failure = get(comm, "commfuseCommIsUsable")->failure();
    *usable = failure.empty() ? 1 : 0;
    if (!failure.empty()) commfuse::api::last_error() = failure;
  });
}

commfuseStatus_t commfuseCommAbort(commfuseComm_t comm) {
  return guarded("commfuseCommAbort",
                 [&] { get(comm, "commfuseCommAbort")->abort("commfuseCommAbort"); });
}

commfuseStatus_t commfuseBarrier(commfuseComm_t comm) {
  return guarded("commfuseBarrier", [&] { get(comm, "commfuseBarrier")->barrier(); });
}

commfuseStatus_t commfuseBroadcast(void* buf, uint64_t count, commfuseDataType dtype, int root,
                                   commfuseComm_t comm) {
  return guarded("commfuseBroadcast",
                 [&] { get(comm, "commfuseBroadcast")->broadcast(buf, count, dt(dtype), root); });
}

commfuseStatus_t commfuseAllGather(const void* sendbuf, void* recvbuf, uint64_t sendCount,
                                   commfuseDataType dtype, commfuseComm_t comm) {
  return guarded("commfuseAllGather", [&] {
    get(comm, "commfuseAllGather")->all_gather(sendbuf, recvbuf, sendCount, dt(dtype));
  });
}

commfuseStatus_t commfuseReduceScatter(const void* sendbuf, void* recvbuf, uint64_t recvCount,
                                       commfuseDataType dtype, commfuseComm_t comm) {
  return guarded("commfuseReduceScatter", [&] {
    get(comm, "commfuseReduceScatter")->reduce_scatter(sendbuf, recvbuf, recvCount, dt(dtype));
  });
}

commfuseStatus_t commfuseAllReduce(const void* sendbuf, void* recvbuf, uint64_t count,
                                   commfuseDataType dtype, commfuseComm_t comm) {
  return guarded("commfuseAllReduce", [&] {
    get(comm, "commfuseAllReduce")->all_reduce(sendbuf, recvbuf, count, dt(dtype));
  });
}

commfuseStatus_t commfuseAllToAll(const void* sendbuf, void* recvbuf, uint64_t countPerPeer,
                                  commfuseDataType dtype, commfuseComm_t comm) {
  return guarded("commfuseAllToAll", [&] {
    get(comm, "commfuseAllToAll")->all_to_all(sendbuf, recvbuf, countPerPeer, dt(dtype));
  });
}

}  // extern "C"
