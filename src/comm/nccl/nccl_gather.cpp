#include "comm/nccl/nccl_gather.hpp"

#include <dlfcn.h>
#include <nccl.h>

#include <cstring>

#include "core/error.hpp"

namespace commfuse::comm::nccl {
namespace {

// The entry points used, resolved from the library at run time.
struct Api {
  void* lib = nullptr;
  std::string name, unavailable;
  decltype(&ncclGetVersion) version = nullptr;
  decltype(&ncclGetUniqueId) unique_id = nullptr;
  decltype(&ncclCommInitRank) init = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

template <typename F>
bool resolve(Api& api, F& fn, const char* symbol) {
  fn = reinterpret_cast<F>(dlsym(api.lib, symbol));
  if (fn == nullptr && api.unavailable.empty())
    api.unavailable = detail::cat(api.name, " lacks ", symbol);
  return fn != nullptr;
}

Api load() {
  Api api;
  // By soname (the loader's path and cache), then in the toolkit this was built with.
  for (const std::string& name :
       {std::string("libnccl.so.2"), std::string(COMMFUSE_CUDA_LIBDIR "/libnccl.so.2")}) {
    api.lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.lib != nullptr) {
      api.name = name;
      break;
    }
  }
  if (api.lib == nullptr) {
    api.unavailable = detail::cat("libnccl.so.2 not found (", dlerror(), ")");
    return api;
  }
  (void)(resolve(api, api.version, "ncclGetVersion") &&
         resolve(api, api.unique_id, "ncclGetUniqueId") &&
         resolve(api, api.init, "ncclCommInitRank") &&
         resolve(api, api.all_gather, "ncclAllGather") &&
         resolve(api, api.destroy, "ncclCommDestroy") &&
         resolve(api, api.error_string, "ncclGetErrorString"));
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
