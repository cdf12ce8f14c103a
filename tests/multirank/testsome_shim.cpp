// MPI fault injection for mpi_testsome_error_w2 (LD_PRELOAD): MPI_Testsome fails once, as
// Open MPI reports a failed request (MPI_ERR_IN_STATUS, the request among those completed),
// on the rank CF_SHIM_TESTSOME_RANK names, at the first call that completes a request while
// CF_SHIM_TESTSOME_ARMED is set (the test case sets it around the one collective it checks,
// so communicator set-up is untouched). Every other call goes to Open MPI's PMPI_Testsome.
#include <mpi.h>

#include <cstdlib>

extern "C" int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                            MPI_Status statuses[]) {
  const int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
  static bool fired = false;
  if (rc != MPI_SUCCESS || fired || *outcount == MPI_UNDEFINED || *outcount == 0) return rc;
  const char* armed = std::getenv("CF_SHIM_TESTSOME_ARMED");
  const char* target = std::getenv("CF_SHIM_TESTSOME_RANK");
  const char* me = std::getenv("OMPI_COMM_WORLD_RANK");
  if (armed == nullptr || target == nullptr || me == nullptr || std::atoi(target) != std::atoi(me))
    return rc;
  fired = true;
  if (statuses != MPI_STATUSES_IGNORE) statuses[0].MPI_ERROR = MPI_ERR_OTHER;
  return MPI_ERR_IN_STATUS;
}
