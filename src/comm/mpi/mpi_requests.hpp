// Waiting for MPI with a deadline. MPI's own waits block forever, so every wait here polls
// (MPI_Testsome, which also drives progress: Open MPI's TCP transport moves bytes only
// inside MPI calls) and gives the CPU away once a wait gets long, because ranks may share
// few cores. Only built with MPI.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/failure.hpp"
#include "core/small_vector.hpp"

namespace commfuse::comm::mpi {

// How a rank waits: the deadline (seconds without any progress), whether to give its core
// away soon (more ranks than cores), and the transport's failure, which ends a wait within
// one of its clock readings once another thread records it (Comm::abort from a watchdog);
// null where nothing may end the wait early. progress_thread: whether a stream's transfers
// are polled by a thread of their own (mpi_pipeline.hpp, use_progress_thread).
struct WaitRules {
  int timeout_s = 300;
  bool oversubscribed = false;
  const Failure* stop = nullptr;
  bool progress_thread = false;
};

// Set once an MPI wait of this process timed out or an MPI call failed: a peer may be dead
// or stuck, and MPI_Finalize at exit, which synchronizes with every process, would wait for
// it forever (measured with a stalled peer), so mpi_comm.cpp then skips it; mpirun, seeing
// a process exit without finalizing, ends the job and reports it.
void note_peer_unresponsive();
// Keeps `memory` until the process exits: what MPI may still read or write after a failure
// (an abandoned request's buffers) must not be freed. Kept reachable, so that leak checkers
// report nothing.
void keep_until_exit(std::shared_ptr<void> memory);
bool peer_unresponsive();

// Throws RUNTIME_ERROR "<op>(rank <rank>): <call> failed: <MPI's message>" unless rc is
// MPI_SUCCESS.
void check(int rc, const char* call, const char* op, int rank);

// One MPI_Testsome over requests[0, count): MPI moves bytes meanwhile (Open MPI's TCP
// transport progresses only inside MPI calls), and the requests that completed become
// MPI_REQUEST_NULL. Returns how many completed, MPI_UNDEFINED where none was active; an MPI
// error throws as check() does. peers (per request, or null): a request that failed is
// among those MPI completed in that call (MPI_ERR_IN_STATUS), and the error names their
// peers, "MPI_Testsome on a transfer with rank 1 failed: ...".
int test_some(MPI_Request* requests, size_t count, const char* op, int rank,
              const int* peers = nullptr);

// Waits for requests that carry no peer to blame (set-up collectives): RUNTIME_ERROR
// naming op and rank after timeout_s seconds without any of them completing. The requests
// left unfinished then are the caller's to abandon, with every buffer they use (MPI may
// still complete them; it forbids freeing or cancelling a nonblocking collective's).
void wait_all(std::vector<MPI_Request>& requests, const char* op, int rank, int timeout_s,
              bool oversubscribed);

// The largest message Open MPI's TCP transport sends eagerly: its eager limit (64 KiB) less
// room for its own header. A larger message goes by rendezvous, a round trip before its
// data moves.
inline constexpr size_t kEagerMessageBytes = 64 * 1024 - 128;

// The pieces Batch splits a transfer of `bytes` into: each this size, the last one less.
size_t message_piece_bytes(size_t bytes);

// A batch of point-to-point transfers of one tag that complete together. Messages are
// split into pieces so that any byte count fits MPI's int counts, and one of up to twice
// the eager size goes as two eager pieces, without a rendezvous; both sides split by the
// byte count alone, and MPI matches messages between two ranks with one tag in posting
// order. A receive posted for more than the message may bring (the descriptors') must
// therefore stay within kEagerMessageBytes: one piece on both sides.
class Batch {
 public:
  Batch(MPI_Comm comm, int tag, int rank, const char* op, const WaitRules& rules);
  ~Batch();  // a batch not waited for (an exception) is cancelled, see cancel()
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void send(int peer, const void* buf, size_t bytes);
  void recv(int peer, void* buf, size_t bytes);
  // One piece of a peer's transfer, received on its own: bytes must be what
  // message_piece_bytes gives that transfer (or its remainder).
  void recv_piece(int peer, void* buf, size_t bytes);
  // Returns once every transfer completed. The deadline is timeout_s seconds without any
  // transfer completing (a large transfer on a slow link is not a hang); on expiry the
  // batch is cancelled and RUNTIME_ERROR names the peers whose data did not arrive; the
  // same, giving the stop's reason, once rules.stop records a failure.
  void wait();
  // Lets MPI move bytes once without waiting (Open MPI's TCP transport progresses only inside
  // MPI calls): for the caller's own work between posting and wait(), so that the transfers
  // go on meanwhile.
  void progress();

 private:
  void post(int peer, void* buf, size_t bytes, bool is_recv);
  void post_one(int peer, void* buf, int bytes, bool is_recv);
  // Cancels unfinished receives, so late data cannot land in buffers the caller has freed,
  // and releases every request. (MPI cannot cancel sends; they finish in the background.)
  void cancel() noexcept;
  std::string missing_peers() const;

  MPI_Comm comm_;
  int tag_;
  int rank_;
  const char* op_;
  WaitRules rules_;
  // Inline for a send and a receive of two pieces each per peer of 8 (no allocation per
  // call).
  SmallVector<MPI_Request, 32> requests_;
  SmallVector<int, 32> peer_;      // per request
  SmallVector<char, 32> is_recv_;  // per request
};

}  // namespace commfuse::comm::mpi
