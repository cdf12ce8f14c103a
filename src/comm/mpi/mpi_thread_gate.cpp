#if COMMFUSE_HAVE_MPI
#include "comm/mpi/mpi_thread_gate.hpp"

#include <mpi.h>

#include <atomic>
#include <thread>

#include "comm/mpi/mpi_pipeline.hpp"
#include "core/error.hpp"

namespace commfuse::comm::mpi {
namespace {

std::atomic<std::thread::id> g_in_mpi{};  // the thread in a call over MPI, or none
thread_local int t_depth = 0;             // this thread's calls inside one another

const char* thread_level_name() {
  const int level = mpi_thread_level();
  return level == MPI_THREAD_SINGLE     ? "MPI_THREAD_SINGLE"
         : level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
                                        : "MPI_THREAD_SERIALIZED";
}

}  // namespace

MpiThreadGate::MpiThreadGate(const char* op, int rank) {
  if (mpi_allows_any_thread()) return;
  if (t_depth == 0) {
    if (!mpi_allows_progress_thread()) {  // FUNNELED or SINGLE: the main thread only
      int is_main = 0;
      MPI_Is_thread_main(&is_main);
      if (is_main == 0)
        detail::throw_status(
            Status::kRuntimeError,
            detail::cat(op, "(rank ", rank, "): MPI runs at ", thread_level_name(),
                        ", so calls over MPI must come from the thread that initialized it"));
    }
    std::thread::id none;
    if (!g_in_mpi.compare_exchange_strong(none, std::this_thread::get_id(),
                                          std::memory_order_acquire))
      detail::throw_status(
          Status::kRuntimeError,
          detail::cat(op, "(rank ", rank,
                      "): another thread of this process is in a call over MPI, and MPI runs "
                      "at ",
                      thread_level_name(),
                      " (one thread in MPI at a time); initialize MPI with "
                      "MPI_THREAD_MULTIPLE to use MPI communicators from several threads at "
                      "once"));
  }
  ++t_depth;
  held_ = true;
}

MpiThreadGate::~MpiThreadGate() {
  if (held_ && --t_depth == 0) g_in_mpi.store(std::thread::id(), std::memory_order_release);
}

}  // namespace commfuse::comm::mpi
#endif  // COMMFUSE_HAVE_MPI
