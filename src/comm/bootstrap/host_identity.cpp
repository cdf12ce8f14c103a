#include "comm/bootstrap/host_identity.hpp"

#include <unistd.h>

#include <fstream>

#include "core/error.hpp"
#include "core/params.hpp"

namespace commfuse::comm {

void check_host_id() {
  // The set-up records are lines: a line break inside would misread every record after it
  // ("malformed set-up record" on every rank, naming nothing).
  CF_CHECK_ARG(params::get_string("COMMFUSE_HOST_ID").find_first_of("\r\n") == std::string::npos,
               "COMMFUSE_HOST_ID must be one line (it holds a line break)");
}

std::string host_identity() {
  if (std::string id = params::get_string("COMMFUSE_HOST_ID"); !id.empty()) {
    check_host_id();
    return id;
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot_id);  // stays empty where /proc is missing: hostname alone then
  return std::string(host) + "/" + boot_id;
}

}  // namespace commfuse::comm
