#include "comm/nccl/nccl_gather.hpp"

#include <nccl.h>

#include <cstring>

#include "core/error.hpp"
#include "core/shared_library.hpp"

namespace commfuse::comm::nccl {
namespace {

// The entry points used, resolved from the library at run time.
struct Api {
  std::string name, unavailable;
  decltype(&ncclGetVersion) version = nullptr;
  decltype(&ncclGetUniqueId) unique_id = nullptr;
  decltype(&ncclCommInitRank) init = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

Api load() {
  Api api;
  // By soname (the loader's path and cache), then in the toolkit this was built with.
  SharedLibrary lib{"libnccl.so.2", COMMFUSE_CUDA_LIBDIR "/libnccl.so.2"};
  (void)(lib.resolve(api.version, "ncclGetVersion") &&
         lib.resolve(api.unique_id, "ncclGetUniqueId") &&
         lib.resolve(api.init, "ncclCommInitRank") &&
         lib.resolve(api.all_gather, "ncclAllGather") &&
         lib.resolve(api.destroy, "ncclCommDestroy") &&
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

NcclGather::NcclGather(int rank, int size, const AllGather& all_gather) : rank_(rank) {
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
  ncclComm_t comm = nullptr;
  check(a.init(&comm, size, id, rank), rank, "ncclCommInitRank");
  comm_ = comm;
}

NcclGather::~NcclGather() {
  if (comm_ != nullptr) api().destroy(static_cast<ncclComm_t>(comm_));
}

void NcclGather::all_gather(void* recv, size_t bytes, void* stream) {
  void* mine = static_cast<char*>(recv) + static_cast<size_t>(rank_) * bytes;
  check(api().all_gather(mine, recv, bytes, ncclUint8, static_cast<ncclComm_t>(comm_),
                         static_cast<cudaStream_t>(stream)),
        rank_, "ncclAllGather");
}

}  // namespace commfuse::comm::nccl
