// One thread of the process in MPI at a time, where MPI was initialized below
// MPI_THREAD_MULTIPLE (commfuse initializes it MPI_THREAD_SERIALIZED; a program may pick
// FUNNELED or SINGLE itself). CommImpl::Entered keeps a second thread out of one
// communicator; this keeps a second thread's call (a collective, an operator, a rejection)
// out of MPI while another thread is in one on any communicator: refused with RuntimeFailure,
// not run into MPI's undefined behaviour (two threads in MPI at once under SERIALIZED:
// corrupt messages or a crash). Creating or destroying an MPI communicator is not gated:
// do it while no other thread is in a call.
#pragma once

namespace commfuse::comm::mpi {

class MpiThreadGate {
 public:
  // Passes at MPI_THREAD_MULTIPLE, and for a thread already inside (an operator's own
  // collectives); else RuntimeFailure "<op>(rank <rank>): ..." naming the thread level.
  MpiThreadGate(const char* op, int rank);
  ~MpiThreadGate();
  MpiThreadGate(const MpiThreadGate&) = delete;
  MpiThreadGate& operator=(const MpiThreadGate&) = delete;

 private:
  bool held_ = false;
};

}  // namespace commfuse::comm::mpi
