#pragma once
#include <string>
namespace commfuse::comm {
// MPI library version string ("Open MPI v4.1.4, ..."), or "not built".
std::string mpi_library_version();
}  // namespace commfuse::comm
