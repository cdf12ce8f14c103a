// comm/nccl in a build without the CUDA backend: NCCL is not there to use.
#include "comm/nccl/nccl_gather.hpp"
#include "core/error.hpp"

namespace commfuse::comm::nccl {
namespace {

constexpr const char* kWhy = "this commfuse was built without CUDA";

}  // namespace

std::string nccl_unavailable() {
  return kWhy;
}

std::string nccl_describe() {
  return kWhy;
}

NcclGather::NcclGather(int rank, int, const AllGather&, int timeout_s)
    : rank_(rank), timeout_s_(timeout_s) {
  detail::throw_status(Status::kParamInvalid, detail::cat("NCCL: not supported: ", kWhy));
}

NcclGather::~NcclGather() = default;

void NcclGather::abort() {}

void NcclGather::all_gather(void*, size_t, void*) {
  detail::throw_status(Status::kParamInvalid, detail::cat("NCCL: not supported: ", kWhy));
}

}  // namespace commfuse::comm::nccl
