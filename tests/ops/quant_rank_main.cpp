// One rank of a quantized-reduction test (tests/ops), started like ops_rank_main by
// `commfuse launch -n W` or mpirun. Prints "rank R: <case> OK" and exits 0, or exits 1.
//
//   commfuse_quant_rank_tests numerics | c_api | reject | reject_peer
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "quant_cases.hpp"

int main(int argc, char** argv) {
  const std::map<std::string, std::function<int(commfuse::Comm&)>> cases = {
      {"numerics", optest::case_quant_numerics},
      {"c_api", optest::case_quant_c_api},
      {"reject", optest::case_quant_reject},
      {"reject_peer", optest::case_quant_reject_peer},
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
      std::printf("rank %d: quant %s OK (world %d, transport %s)\n", comm->rank(), argv[1],
                  comm->world_size(), comm->transport_name());
  } catch (const commfuse::Error& e) {
    std::fprintf(stderr, "unexpected error %d: %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
  return optest::g_failures == 0 ? rc : 1;
}
