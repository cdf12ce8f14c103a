// init_method "mpi": rank and size come from MPI_COMM_WORLD. Ranks that all share one
// host use the shm transport (MPI only carries the set-up records); ranks on several
// hosts, or any job with COMMFUSE_TRANSPORT=mpi, use the MPI transport.
#include "comm/comm_impl.hpp"
#include "comm/host_cores.hpp"
#include "core/error.hpp"

#if COMMFUSE_HAVE_MPI
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "comm/bootstrap/host_identity.hpp"
#include "comm/mpi/mpi_pipeline.hpp"
#include "comm/mpi/mpi_requests.hpp"
#include "comm/mpi/mpi_transport.hpp"
#include "core/cpu_features.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/threads.hpp"
#endif

namespace commfuse::comm {

#if COMMFUSE_HAVE_MPI

// comm_create.cpp: the shm communicator, with the record exchange supplied by the caller.
using SetupAllGather = std::function<std::vector<std::string>(const std::string&)>;
using SetupBarrier = std::function<void()>;
std::unique_ptr<CommImpl> create_shm_comm(int rank, int world_size,
                                          const SetupAllGather& all_gather,
                                          const SetupBarrier& barrier);

namespace {

constexpr const char* kOp = "comm init";

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (mpi::peer_unresponsive()) {
    // MPI_Finalize would wait for the failed peer (measured: forever, for a stalled one);
    // exiting without it makes mpirun end the job and report this process.
    std::fprintf(stderr,
                 "commfuse: not calling MPI_Finalize: a peer failed and it would wait for it\n");
    return;
  }
  MPI_Finalize();
}

// Initializes MPI unless the program did. Whoever initializes finalizes: we do it at exit,
// after main's communicators are gone (mpirun reports a process that exits without
// MPI_Finalize as failed).
void ensure_mpi_initialized() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    detail::throw_status(Status::kRuntimeError,
                         "comm init: init_method \"mpi\" after MPI_Finalize was called");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  // SERIALIZED: a communicator is driven by one thread at a time, like any collective.
  // Programs that drive several MPI communicators from several threads at once initialize
  // MPI themselves with MPI_THREAD_MULTIPLE.
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    detail::throw_status(Status::kRuntimeError, "comm init: MPI_Init_thread failed");
  std::atexit(finalize_at_exit);
}

// One nonblocking set-up collective: its request and every buffer it reads or writes, on the
// heap. A timeout abandons them: MPI forbids freeing or cancelling the request (MPI-3.1
// §5.12) and may still complete it later, reading and writing these buffers after the
// caller is gone (mpi::keep_until_exit).
template <typename T>
class SetUpCollective {
 public:
  explicit SetUpCollective(T data = {}) : state_(new State{std::move(data)}) {}
  ~SetUpCollective() { delete state_; }
  SetUpCollective(const SetUpCollective&) = delete;
  SetUpCollective& operator=(const SetUpCollective&) = delete;
  T& data() { return state_->data; }
  MPI_Request* request() { return &state_->requests[0]; }
  void wait(int rank, int timeout_s) {
    try {
      mpi::wait_all(state_->requests, kOp, rank, timeout_s, false);
    } catch (...) {
      mpi::keep_until_exit(std::shared_ptr<State>(std::exchange(state_, nullptr)));
      throw;
    }
  }

 private:
  struct State {
    T data;
    std::vector<MPI_Request> requests{MPI_REQUEST_NULL};
  };
  State* state_;
};

// Our duplicate of MPI_COMM_WORLD until a transport takes it.
class OwnedComm {
 public:
  OwnedComm(int rank, int timeout_s) {
    SetUpCollective<MPI_Comm> dup(MPI_COMM_NULL);
    mpi::check(MPI_Comm_idup(MPI_COMM_WORLD, &dup.data(), dup.request()), "MPI_Comm_idup", kOp,
               rank);
    dup.wait(rank, timeout_s);
    comm_ = dup.data();
    // Errors come back as codes (turned into RUNTIME_ERROR) instead of killing the job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~OwnedComm() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  MPI_Comm get() const { return comm_; }
  MPI_Comm release() { return std::exchange(comm_, MPI_COMM_NULL); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// Every rank's string, in rank order (lengths first, then the bytes).
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int rank,
                                        int timeout_s) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  struct Lengths {
    int mine = 0;
    std::vector<int> all;
  };
  SetUpCollective<Lengths> lengths({static_cast<int>(mine.size()), std::vector<int>(size)});
  Lengths& n = lengths.data();
  mpi::check(MPI_Iallgather(&n.mine, 1, MPI_INT, n.all.data(), 1, MPI_INT, comm, lengths.request()),
             "MPI_Iallgather", kOp, rank);
  lengths.wait(rank, timeout_s);
  struct Blobs {
    std::string mine, all;
    std::vector<int> lens, displs;
  };
  SetUpCollective<Blobs> blobs({mine, {}, n.all, std::vector<int>(size)});
  Blobs& b = blobs.data();
  int total = 0;
  for (int r = 0; r < size; ++r) {
    b.displs[r] = total;
    total += b.lens[r];
  }
  b.all.assign(static_cast<size_t>(total), '\0');
  mpi::check(MPI_Iallgatherv(b.mine.data(), n.mine, MPI_BYTE, b.all.data(), b.lens.data(),
                             b.displs.data(), MPI_BYTE, comm, blobs.request()),
             "MPI_Iallgatherv", kOp, rank);
  blobs.wait(rank, timeout_s);
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.push_back(b.all.substr(b.displs[r], b.lens[r]));
  return out;
}

void barrier(MPI_Comm comm, int rank, int timeout_s) {
  SetUpCollective<int> b;
  mpi::check(MPI_Ibarrier(comm, b.request()), "MPI_Ibarrier", kOp, rank);
  b.wait(rank, timeout_s);
}

// What each rank tells the others before anything is built. A rank whose own checks
// failed still takes part, so that its peers fail at once naming it instead of waiting.
struct SetupRecord {
  int code = 0;             // Status of this rank's own checks
  std::string transport;    // its COMMFUSE_TRANSPORT: the choice must be the same everywhere
  std::string host;         // host_identity()
  std::string cpus;         // kernels::cpu::compute_cpu_list() (may be empty)
  std::string thread_cpus;  // kernels::cpu::calling_thread_cpu_list() (may be empty)
  std::string error;        // its error message when code != 0

  std::string encode() const {
    std::ostringstream os;
    os << code << '\n'
       << transport << '\n'
       << host << '\n'
       << cpus << '\n'
       << thread_cpus << '\n'
       << error;
    return os.str();
  }
  static SetupRecord decode(const std::string& s) {
    SetupRecord r;
    std::istringstream is(s);
    std::string code;
    std::getline(is, code);
    std::getline(is, r.transport);
    std::getline(is, r.host);
    std::getline(is, r.cpus);
    std::getline(is, r.thread_cpus);
    std::getline(is, r.error, '\0');
    r.code = std::atoi(code.c_str());
    return r;
  }
};

}  // namespace

std::unique_ptr<CommImpl> create_mpi_comm(int rank, int world_size) {
  ensure_mpi_initialized();
  int me = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  log::set_rank(me);

  SetupRecord mine;
  mine.host = host_identity();
  mine.cpus = kernels::cpu::compute_cpu_list();
  mine.thread_cpus = kernels::cpu::calling_thread_cpu_list();
  int timeout_s = 300;
  std::string progress_mode;
  int num_threads = 0;
  try {
    timeout_s = params::timeout_seconds();
    mine.transport = params::get_string("COMMFUSE_TRANSPORT");
    progress_mode = params::get_string("COMMFUSE_MPI_PROGRESS_THREAD");
    num_threads = params::num_threads_override();
    check_comm_params();
    CF_CHECK_ARG((rank < 0 || rank == me) && (world_size < 0 || world_size == size),
                 "comm init(rank ", me, "): rank ", rank, " / world_size ", world_size,
                 " were passed but MPI_COMM_WORLD has rank ", me, " / size ", size);
  } catch (const Error& e) {
    mine.code = static_cast<int>(e.code());
    mine.error = e.what();
  }

  OwnedComm comm(me, timeout_s);
  std::vector<SetupRecord> recs;
  for (const auto& s : gather_strings(comm.get(), mine.encode(), me, timeout_s))
    recs.push_back(SetupRecord::decode(s));
  if (mine.code != 0) detail::throw_status(static_cast<Status>(mine.code), mine.error);
  for (int r = 0; r < size; ++r)
    if (recs[r].code != 0)
      detail::throw_status(Status::kRuntimeError, detail::cat("comm init(rank ", me, "): rank ", r,
                                                              " failed: ", recs[r].error));

  std::set<std::string> hosts;
  int local_ranks = 0, first_local = -1;
  std::vector<std::string> local_cpus, local_thread_cpus;  // this host's ranks' CPU sets
  for (int r = 0; r < size; ++r) {
    CF_CHECK_ARG(recs[r].transport == mine.transport, "comm init(rank ", me, "): rank ", r,
                 " has COMMFUSE_TRANSPORT=", recs[r].transport, " but rank ", me, " has ",
                 mine.transport);
    hosts.insert(recs[r].host);
    if (recs[r].host == mine.host) {
      if (first_local < 0) first_local = r;
      ++local_ranks;
      local_cpus.push_back(recs[r].cpus);
      local_thread_cpus.push_back(recs[r].thread_cpus);
    }
  }
  CF_CHECK_ARG(mine.transport != "shm" || hosts.size() == 1, "comm init(rank ", me,
               "): COMMFUSE_TRANSPORT=shm but the ranks run on ", hosts.size(), " hosts");

  if (mine.transport != "mpi" && hosts.size() == 1) {
    const MPI_Comm c = comm.get();
    return create_shm_comm(
        me, size, [&](const std::string& blob) { return gather_strings(c, blob, me, timeout_s); },
        [&] { barrier(c, me, timeout_s); });
  }

  SetUpCollective<uint64_t> id(0);
  if (me == 0) id.data() = std::random_device{}() * 4294967296ull + std::random_device{}();
  mpi::check(MPI_Ibcast(&id.data(), 1, MPI_UINT64_T, 0, comm.get(), id.request()), "MPI_Ibcast",
             kOp, me);
  id.wait(me, timeout_s);
  const uint64_t group_id = id.data();
  char name[64];
  std::snprintf(name, sizeof(name), "commfuse-%016llx-w%d",
                static_cast<unsigned long long>(group_id), size);

  // The cores this host's ranks may run on together (the union of their CPU sets: ranks
  // confined to one cpuset share it however many cores are online), else the online cores;
  // and those their calling threads, which wait on the peers, run on (comm_create.cpp).
  const HostCores host = host_cores(local_cpus, local_thread_cpus);
  const int cores = host.cores, waiting_cores = host.waiting;
  const bool oversubscribed = local_ranks > waiting_cores;
  if (me == first_local) warn_if_affinity_short(local_ranks, host);  // once a host
  // A progress thread needs a core the ranks' threads leave free, counted where they wait (a
  // thread started from a pinned first thread inherits its mask).
  const bool progress_thread =
      mpi::use_progress_thread(progress_mode, local_ranks, waiting_cores, num_threads);
  CF_LOG(kInfo, "comm ", name, ": rank ", me, "/", size, " on mpi (", hosts.size(), " host",
         hosts.size() == 1 ? "" : "s", ", ", local_ranks, " ranks here",
         oversubscribed ? ", oversubscribed" : "",
         progress_thread && mpi::mpi_allows_progress_thread()
             ? ", streams polled by a progress thread"
             : "",
         ")");
  // Not yet hierarchical: same-host pairs also go through MPI (whose shared-memory BTL,
  // when enabled, carries them) rather than through our shm regions.
  if (hosts.size() > 1 && local_ranks > 1)
    CF_LOG(kInfo, "comm ", name,
           ": same-host ranks talk through MPI too (no shm within hosts yet)");
  return std::make_unique<CommImpl>(
      me, size, local_ranks, name,
      std::make_unique<mpi::MpiTransport>(comm.release(), oversubscribed, progress_thread), cores);
}

#else  // !COMMFUSE_HAVE_MPI

std::unique_ptr<CommImpl> create_mpi_comm(int rank, int /*world_size*/) {
  detail::throw_status(Status::kParamInvalid,
                       detail::cat("comm init(rank ", rank,
                                   "): init_method \"mpi\" needs commfuse built with MPI "
                                   "(COMMFUSE_WITH_MPI=ON and an MPI library found)"));
}

#endif

}  // namespace commfuse::comm
