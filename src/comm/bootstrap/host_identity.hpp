// Which machine this process runs on, as a string the ranks can compare to decide who
// shares memory with whom.
#pragma once

#include <string>

namespace commfuse::comm {

// Equal for processes on the same machine (same boot of the same kernel), different
// across machines: "hostname/boot_id". Hostnames alone collide in containers and cloned
// VMs; the boot id does not. COMMFUSE_HOST_ID, when set and non-empty, replaces it, so
// tests on one machine can pretend to be on several hosts.
std::string host_identity();
// InvalidArgument where COMMFUSE_HOST_ID holds a line break (the set-up records are lines):
// checked with the other parameters at creation, so every rank hears of it (comm_create).
void check_host_id();

}  // namespace commfuse::comm
