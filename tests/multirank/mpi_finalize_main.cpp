// A communicator used after the program's own MPI_Finalize: any MPI call then ends the whole
// job through MPI's error handler ("MPI_Irecv() was called after MPI_FINALIZE ... Your MPI
// job will now abort"), so a call is refused (RuntimeFailure naming it, the communicator
// unusable for good), and abort() and the destroy send nothing. Its own executable: it
// initializes and finalizes MPI itself, as a program that owns MPI does.
#include <mpi.h>

#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failures = 0;
  auto check = [&](bool ok, const char* what, const char* detail) {
    if (!ok) {
      ++failures;
      std::fprintf(stderr, "FAILED rank %d: %s (%s)\n", rank, what, detail);
    }
  };
  auto comm = std::make_unique<commfuse::Comm>(rank, size, "mpi");
  std::vector<float> x(8, 1.0f), y(8);
  comm->all_reduce(x.data(), y.data(), x.size(), commfuse::DType::kFloat32);
  check(y[0] == static_cast<float>(size), "the all_reduce before MPI_Finalize", "wrong sum");
  MPI_Finalize();
  try {
    comm->barrier();
    check(false, "a barrier after MPI_Finalize succeeded", "");
  } catch (const commfuse::RuntimeFailure& e) {
    std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", rank, e.what());
    check(std::strstr(e.what(), "MPI_Finalize was called") != nullptr,
          "the refusal does not name MPI_Finalize", e.what());
  }
  check(!comm->usable(), "usable after a call refused for MPI_Finalize", "");
  comm->abort("after MPI_Finalize");  // sends nothing
  comm.reset();
  if (failures == 0) std::printf("rank %d: mpi_finalize OK\n", rank);
  return failures == 0 ? 0 : 1;
}
