// How a process finds its group: the init_method string (torch.distributed's spelling)
// turned into where rank 0 listens and who this process is.
#pragma once

#include <string>
#include <string_view>

namespace commfuse::comm {

enum class InitKind { kTcp, kEnv, kMpi };

struct InitMethod {
  InitKind kind = InitKind::kTcp;
  std::string host;  // IPv6 literals without brackets ("::1")
  int port = 0;
  int rank = -1;
  int world_size = -1;
};

// Accepted forms:
//   "tcp://host:port"  host is a name, an IPv4 address or a bracketed IPv6 address;
//                      rank and world_size come from the arguments.
//   "env://"           MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment;
//                      a rank/world_size argument >= 0 must agree with it (or stands in
//                      for an unset variable).
//   "mpi"              rank/world_size are returned as given; the MPI layer fills them.
// For tcp and env, world_size >= 1 and 0 <= rank < world_size. Anything else throws
// InvalidArgument (PARAM_INVALID) naming the argument and the values.
InitMethod parse_init_method(std::string_view init_method, int rank, int world_size);

}  // namespace commfuse::comm
