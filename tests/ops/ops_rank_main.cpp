// One rank of an operator test (tests/ops). Started by `commfuse launch -n W` (env://) or
// by mpirun (init "mpi"), like the collectives' multi-rank tests. Prints
// "rank R: <case> OK" and exits 0, or prints what went wrong and exits 1.
//
//   commfuse_ops_rank_tests numerics | c_api | reject | reject_peer | device_reject | recover |
//                           fault | soak
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "numerics.hpp"

int main(int argc, char** argv) {
  const std::map<std::string, std::function<int(commfuse::Comm&)>> cases = {
      {"numerics", optest::case_numerics},
      {"c_api", optest::case_c_api},
      {"reject", optest::case_reject},
      {"reject_peer", optest::case_reject_peer},
      {"alltoall_numerics", optest::case_alltoall_numerics},
      {"alltoall_reject", optest::case_alltoall_reject},
      {"device_reject", optest::case_device_reject},
      {"device_numerics", optest::case_device_numerics},
      {"recover", optest::case_recover},
      {"fault", optest::case_fault},
      {"soak", optest::case_soak},
  };
  if (argc != 2 || !cases.count(argv[1])) {
    std::fprintf(stderr, "usage: %s <case>\n", argv[0]);
    return 2;
  }
  int rc = 0;
  try {
    auto comm = commfuse::Comm::from_env();
    rc = cases.at(argv[1])(*comm);
    if (optest::g_failures == 0 && rc == 0)
      std::printf("rank %d: %s OK (world %d, transport %s)\n", comm->rank(), argv[1],
                  comm->world_size(), comm->transport_name());
  } catch (const commfuse::Error& e) {
    std::fprintf(stderr, "unexpected error %d: %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
  return optest::g_failures == 0 ? rc : 1;
}
