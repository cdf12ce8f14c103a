// device_calls_use_nccl (nccl_gather.hpp): a parameter rule, in every build.
#include "comm/nccl/nccl_gather.hpp"
#include "core/error.hpp"
#include "core/params.hpp"

namespace commfuse::comm::nccl {

bool device_calls_use_nccl(bool one_host) {
  const std::string pin = params::get_string("COMMFUSE_DEVICE_TRANSPORT");
  CF_CHECK_ARG(!(pin == "ipc" && !one_host),
               "COMMFUSE_DEVICE_TRANSPORT=ipc, but the ranks are on several hosts (CUDA IPC maps "
               "memory of this host only)");
  return pin == "nccl" || !one_host;
}

}  // namespace commfuse::comm::nccl
