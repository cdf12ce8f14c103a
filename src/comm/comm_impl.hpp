// What a Comm is inside: identity, the transport, and the registry that maps the
// communicator's name (the operators' `group` / `hcom` argument) back to it.
#pragma once

#include <commfuse/commfuse.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "comm/transport.hpp"

namespace commfuse::comm {

class CommImpl {
 public:
  // host_cores: the cores this host's ranks may run on together (0: the online cores).
  CommImpl(int rank, int world_size, int local_ranks, std::string name,
           std::unique_ptr<Transport> transport, int host_cores = 0);
  // A call in flight on another thread (a watchdog destroying the communicator, with or
  // without its abort first) is failed and waited out: it still uses the transport, whose
  // memory went from under it (SIGSEGV). Then the peers are told that this rank makes no
  // more calls (Transport::closing), so that one waiting for it fails at once instead of at
  // COMMFUSE_TIMEOUT_S (shm; over MPI, a peer's call that pairs with what this rank sent
  // before may still complete). In a fork() child neither: the group is its parent's.
  ~CommImpl();
  CommImpl(const CommImpl&) = delete;
  CommImpl& operator=(const CommImpl&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_ranks() const { return local_ranks_; }  // ranks on this host
  const std::string& name() const { return name_; }
  Transport& transport() { return *transport_; }

  // An argument error found by this rank before anything was sent: the peers already
  // inside the call fail it at once naming this rank (Transport::reject) instead of waiting
  // for the deadline, and the communicator stays usable on every rank (unless the calls were
  // also out of step: Transport::reject). Throws `code`.
  [[noreturn]] void reject(Status code, const std::string& message);
  // reject's telling alone, held like a call: while another thread is in a call on this
  // communicator nothing is sent (this thread's call would have been refused, and its
  // rejection took the place of that call's next collective, failing it on every rank).
  void tell_rejected(const std::string& message);

  // The thread inside a call — a collective, or an operator with all its collectives — for
  // as long as it lives: a second thread meanwhile is refused (throw_busy) instead of
  // putting its call between the operator's collectives (which failed the communicator).
  // The owner entering again (an operator's own collectives) passes.
  class Entered {
   public:
    Entered(CommImpl& c, const char* op);
    ~Entered();
    Entered(const Entered&) = delete;
    Entered& operator=(const Entered&) = delete;

   private:
    CommImpl* owner_ = nullptr;  // null: nested in this thread's own call
  };

  // What a higher layer keeps per communicator (the CUDA backend's device context, created
  // by its first device call): destroyed before the transport, while the peers can still
  // be reached.
  struct Attachment {
    virtual ~Attachment() = default;
  };
  Attachment* attachment() const { return attachment_.get(); }
  void attach(std::unique_ptr<Attachment> a) { attachment_ = std::move(a); }
  // How many fork()s the process had made when this was created (check_not_forked).
  uint64_t fork_generation() const { return fork_generation_; }

 private:
  int rank_;
  int world_size_;
  int local_ranks_;
  std::string name_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Attachment> attachment_;  // after transport_: destroyed before it
  std::atomic<std::thread::id> caller_{};   // Entered: the thread in a call, or none
  uint64_t fork_generation_;
};

// PARAM_INVALID naming op when this process is a fork() child of c's creator: every call
// (Entered) and abort check it, so a child never touches its parent's transport.
void check_not_forked(const CommImpl& c, const char* op);

// Creates the communicator: bootstrap, transport selection, shm mapping.
std::unique_ptr<CommImpl> create_comm(int rank, int world_size, std::string_view init_method);

// Every COMMFUSE_* parameter (params::all(): choices, integers and their ranges, the ISA cap,
// COMMFUSE_ALGO's ops and shm's algorithm names), read where a communicator is created:
// InvalidArgument naming the first bad one. Every init method calls it before the group
// forms and tells the peers (create_tcp_comm, create_mpi_comm): a bad value on some ranks
// fails every rank at once, instead of the others waiting out their timeout or, for
// COMMFUSE_ALGO, that rank alone failing inside a later call. Kernel dispatch and logging
// read some of them leniently (nothing may throw there).
void check_comm_params();
// One parameter, checked as check_comm_params checks it (what `commfuse info` marks INVALID).
void check_param(std::string_view env);

// Which init method Comm::from_env uses: "mpi" under mpirun (no RANK set), else "env://".
std::string init_method_from_env();

}  // namespace commfuse::comm
