#include "comm/mpi/mpi_info.hpp"

#if COMMFUSE_HAVE_MPI
#include <mpi.h>
#endif

namespace commfuse::comm {

std::string mpi_library_version() {
#if COMMFUSE_HAVE_MPI
  // Callable before MPI_Init (MPI-3), so `commfuse info` needs no MPI job.
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, static_cast<size_t>(len));
  const size_t nl = s.find_first_of("\r\n");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ',' || s.back() == ' ')) s.pop_back();
  return s;
#else
  return "not built";
#endif
}

}  // namespace commfuse::comm
