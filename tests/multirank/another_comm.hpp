// The init method of another communicator over the same ranks: "mpi" under mpirun, else tcp
// on a port rank 0 found free and sent to the others over `c` (MASTER_PORT + 1 could be the
// port of another test's launch running at the same time, which failed such tests at once).
// Collective over c.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace multirank {

// A TCP port free on the loopback now (0 if none could be had).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

inline std::string another_init_method(commfuse::Comm& c) {
  if (std::getenv("MASTER_PORT") == nullptr) return "mpi";
  int32_t port = c.rank() == 0 ? free_port() : 0;
  c.broadcast(&port, 1, commfuse::DType::kInt32, 0);
  return "tcp://127.0.0.1:" + std::to_string(port);
}

}  // namespace multirank
