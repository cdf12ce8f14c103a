#include "support/fuzz_comm.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "support/check.hpp"
#include "support/decode.hpp"

namespace commfuse_fuzz {
namespace {

commfuseComm_t g_comm = nullptr;
char g_name[COMMFUSE_COMM_NAME_MAX];
std::string g_prefix, g_extended;

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

}  // namespace

void init_fuzz_comm() {
  setenv("COMMFUSE_NUM_THREADS", "1", 0);
  setenv("COMMFUSE_TIMEOUT_S", "20", 0);
  // A port found free may be taken before we bind it (another fuzzer starting): retry.
  commfuseStatus_t st = COMMFUSE_RUNTIME_ERROR;
  for (int attempt = 0; attempt < 10 && st != COMMFUSE_SUCCESS; ++attempt) {
    const std::string init = "tcp://127.0.0.1:" + std::to_string(free_port());
    st = commfuseCommInitRank(0, 1, init.c_str(), &g_comm);
  }
  FUZZ_REQUIRE(st == COMMFUSE_SUCCESS, "commfuseCommInitRank(0, 1): %d %s", static_cast<int>(st),
               commfuseGetLastErrorMessage());
  FUZZ_REQUIRE(commfuseCommGetName(g_comm, g_name) == COMMFUSE_SUCCESS, "commfuseCommGetName: %s",
               commfuseGetLastErrorMessage());
  const std::string name = g_name;
  g_prefix = name.substr(0, name.size() - 1);
  g_extended = name + "x";
}

commfuseComm_t fuzz_comm() {
  return g_comm;
}

const char* fuzz_group() {
  return g_name;
}

const char* decode_group(ByteReader& r, std::string& storage) {
  return decode_string(r, g_name,
                       {"no_such_group", g_prefix.c_str(), g_extended.c_str(), "hccl_world_group"},
                       storage);
}

void require_comm_usable(const char* after) {
  int usable = 0;
  const commfuseStatus_t st = commfuseCommIsUsable(g_comm, &usable);
  FUZZ_REQUIRE(st == COMMFUSE_SUCCESS && usable == 1,
               "the communicator is unusable after %s (status %d): %s", after, static_cast<int>(st),
               commfuseGetLastErrorMessage());
}

}  // namespace commfuse_fuzz
