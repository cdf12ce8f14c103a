// Creating a communicator: every rank contributes a small record (host, process, shm
// region) through the bootstrap, then ranks on one host map each other's regions.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/host_identity.hpp"
#include "comm/bootstrap/init_method.hpp"
#include "comm/comm_impl.hpp"
#include "comm/fault.hpp"
#include "comm/host_cores.hpp"
#include "comm/shm/cma.hpp"
#include "comm/shm/shm_transport.hpp"
#include "comm/shm/sync_probe.hpp"
#include "core/algorithm.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/simd.hpp"
#include "core/trace.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/half_gemm_model.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse::comm {

// How the ranks swap set-up records and wait for each other: the TCP bootstrap here, MPI
// for init "mpi" (comm/mpi declares the same signature).
using SetupAllGather = std::function<std::vector<std::string>(const std::string&)>;
using SetupBarrier = std::function<void()>;
std::unique_ptr<CommImpl> create_shm_comm(int rank, int world_size,
                                          const SetupAllGather& all_gather,
                                          const SetupBarrier& barrier);

namespace {

// One rank's record, exchanged at creation. Text, one field per line: easy to debug.
struct RankRecord {
  std::string host;
  int64_t pid = 0;
  uint64_t start_time = 0;
  std::string shm_name;
  uint64_t slot_bytes = 0;
  uint64_t group_id = 0;     // rank 0's random id names the communicator
  uint64_t cma_address = 0;  // where peers find this process's CMA probe word
  std::string cpus;          // kernels::cpu::compute_cpu_list(), "-" where unknown
  std::string thread_cpus;   // kernels::cpu::calling_thread_cpu_list(), "-" where unknown

  std::string encode() const {
    std::ostringstream os;
    os << host << '\n'
       << pid << '\n'
       << start_time << '\n'
       << shm_name << '\n'
       << slot_bytes << '\n'
       << group_id << '\n'
       << cma_address << '\n'
       << (cpus.empty() ? "-" : cpus) << '\n'
       << (thread_cpus.empty() ? "-" : thread_cpus) << '\n';
    return os.str();
  }
  static RankRecord decode(const std::string& s, int from_rank) {
    RankRecord r;
    std::istringstream is(s);
    std::getline(is, r.host);
    is >> r.pid >> r.start_time >> r.shm_name >> r.slot_bytes >> r.group_id >> r.cma_address >>
        r.cpus >> r.thread_cpus;
    if (r.cpus == "-") r.cpus.clear();
    if (r.thread_cpus == "-") r.thread_cpus.clear();
    if (is.fail())
      detail::throw_status(Status::kRuntimeError,
                           detail::cat("comm init: malformed set-up record from rank ", from_rank));
    return r;
  }
};

// kernels::cpu::set_local_ranks for a scope (restored on the way out, a throw included).
class LocalRanksDuring {
 public:
  LocalRanksDuring(int n, int cores)
      : before_(kernels::cpu::local_ranks()), before_cores_(kernels::cpu::host_cores_setting()) {
    kernels::cpu::set_local_ranks(n, cores);
  }
  ~LocalRanksDuring() { kernels::cpu::set_local_ranks(before_, before_cores_); }
  LocalRanksDuring(const LocalRanksDuring&) = delete;
  LocalRanksDuring& operator=(const LocalRanksDuring&) = delete;

 private:
  int before_, before_cores_;
};

// What the group decides from measurements, alike on every rank.
struct GroupVerdicts {
  shm::CmaSupport cma;
  // Rank 0's kernels::cpu::direct_calls_mask for R calls (Transport::direct_calls_pay); 0
  // where ranks share cores or W = 1 (not measured: no plan takes the direct kernel there).
  uint32_t direct_calls = 0;
};

// CMA between the group's ranks (comm/shm/cma.hpp): each rank reads every peer's probe
// word, and the group uses CMA only if every rank could read every peer — decided from the
// same records on every rank, so every rank chooses the same algorithm for a call. With it,
// rank 0's measured verdicts (GroupVerdicts).
GroupVerdicts agree_on_measures(int rank, const std::vector<RankRecord>& recs,
                                const SetupAllGather& all_gather, bool oversubscribed,
                                double sync_us, int group_cores) {
  std::string mine = "ok";
  for (int r = 0; r < static_cast<int>(recs.size()) && mine == "ok"; ++r) {
    if (r == rank) continue;
    const std::string why = shm::cma_probe(static_cast<pid_t>(recs[r].pid), recs[r].cma_address);
    if (!why.empty()) mine = detail::cat("rank ", rank, " cannot read rank ", r, ": ", why);
  }
  // Rank 0 also sends its crossover (a measured copy rate) and, with a core per rank, its
  // few-rows GEMM verdicts (measured here, a few ms; by each rank's own timing two ranks could
  // choose different algorithms for one call): every rank uses those.
  if (rank == 0) {
    const auto ranks = static_cast<int64_t>(recs.size());
    uint32_t direct_calls = 0;
    if (!oversubscribed && ranks > 1) {
      // Timed with the compute threads the ops will run with (each rank its share of the
      // cores, as CommImpl sets after set-up) and so with the thread's CPU clock.
      const LocalRanksDuring local(static_cast<int>(ranks), group_cores);
      direct_calls = kernels::cpu::direct_calls_mask(ranks);
    }
    mine = detail::cat(shm::cma_crossover_bytes(oversubscribed, sync_us), " ", direct_calls, " ",
                       mine);
  }
  const std::vector<std::string> all = all_gather(mine);
  GroupVerdicts v;
  std::istringstream head(all[0]);
  head >> v.cma.min_bytes >> v.direct_calls;
  CF_ASSERT(!head.fail());
  head >> std::ws;
  std::string rank0_verdict;
  std::getline(head, rank0_verdict);
  v.cma.shared_cores = oversubscribed;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const std::string& verdict = r == 0 ? rank0_verdict : all[r];
    if (verdict != "ok" && v.cma.unavailable.empty()) v.cma.unavailable = verdict;
  }
  return v;
}

// Where a mask of kernels::cpu::direct_calls_mask holds, for the verbose line.
std::string describe_direct_calls(uint32_t mask) {
  std::string where;
  for (const DType t : {DType::kFloat16, DType::kBFloat16})
    for (int64_t m = 1; m <= kernels::cpu::kDirectCallsRows; ++m)
      if (kernels::cpu::direct_calls_pay(mask, t, m))
        where += detail::cat(where.empty() ? "" : ", ", dtype_name(t), " m=", m);
  // No bit also where nothing was timed (no native 16-bit kernel, or COMMFUSE_HALF_GEMM pins).
  return where.empty() ? "nowhere (or not timed: no native 16-bit kernel, or a pin)"
                       : "at " + where;
}

}  // namespace

// Used by the TCP bootstrap below and by init "mpi" when every rank is on one host (the
// records then travel through MPI): the record exchange is the caller's.
std::unique_ptr<CommImpl> create_shm_comm(int rank, int world_size,
                                          const SetupAllGather& all_gather,
                                          const SetupBarrier& barrier) {
  const size_t slot_bytes = params::shm_slot_bytes();
  // Rank 0 reads them during set-up (agree_on_measures, timing with the compute threads):
  // read here on every rank first, so that a bad value fails every rank alike, naming the
  // variable, rather than rank 0 alone mid-exchange (its peers saw a lost connection).
  params::get_string("COMMFUSE_HALF_GEMM");
  params::get_string("COMMFUSE_DETERMINISTIC");
  params::num_threads_override();
  shm::Segment own = shm::Segment::create(shm::region_bytes(slot_bytes));
  // COMMFUSE_FAULT=<rank>:comm_init:0:kill — killed before its peers learn the name, which
  // only a launcher that knows its pid can remove (tests/multirank/run_init_kill.sh).
  fault_point(rank, "comm_init", 0);
  RankRecord mine;
  mine.host = host_identity();
  const shm::PeerProcess me = shm::this_process();
  mine.pid = me.pid;
  mine.start_time = me.start_time;
  mine.shm_name = own.name();
  mine.slot_bytes = slot_bytes;
  mine.cma_address = shm::cma_probe_address();
  mine.cpus = kernels::cpu::compute_cpu_list();
  mine.thread_cpus = kernels::cpu::calling_thread_cpu_list();
  if (rank == 0) mine.group_id = std::random_device{}() * 4294967296ull + std::random_device{}();

  const auto blobs = all_gather(mine.encode());
  std::vector<RankRecord> recs;
  for (int r = 0; r < world_size; ++r) recs.push_back(RankRecord::decode(blobs[r], r));
  std::vector<shm::Segment> segments;
  std::vector<shm::PeerProcess> procs;
  try {
    for (int r = 0; r < world_size; ++r) {
      if (recs[r].host != mine.host)
        detail::throw_status(
            Status::kParamInvalid,
            detail::cat("comm init(rank ", rank, "): rank ", r,
                        " runs on another host; ranks on several hosts need init_method \"mpi\""));
      if (recs[r].slot_bytes != slot_bytes)
        detail::throw_status(Status::kParamInvalid,
                             detail::cat("comm init(rank ", rank, "): rank ", r,
                                         " has COMMFUSE_SHM_SLOT_BYTES=", recs[r].slot_bytes,
                                         " but rank ", rank, " has ", slot_bytes));
    }
    // all_to_all and reduce_scatter split a slot into a chunk of at least 64 bytes per rank.
    if (slot_bytes < size_t{64} * static_cast<size_t>(world_size))
      detail::throw_status(
          Status::kParamInvalid,
          detail::cat("comm init(rank ", rank, "): COMMFUSE_SHM_SLOT_BYTES=", slot_bytes,
                      " is too small for ", world_size, " ranks (at least 64 bytes per rank: ",
                      size_t{64} * static_cast<size_t>(world_size), ")"));
    for (int r = 0; r < world_size; ++r) {
      // Alive for certain until this rank reaches the barrier below (the peer waits there
      // for it), so what process_alive says now is whether this rank can see it.
      shm::PeerProcess p{static_cast<pid_t>(recs[r].pid), recs[r].start_time};
      p.visible = r != rank && shm::process_alive(p);
      procs.push_back(p);
      if (r == rank)
        segments.push_back(std::move(own));
      else
        segments.push_back(shm::Segment::open(recs[r].shm_name, shm::region_bytes(slot_bytes)));
    }
    // Every rank has mapped every region: the names can go, before the probes below (100 ms
    // and more), so that a rank killed now leaves nothing in /dev/shm (a create / destroy
    // loop killed at random moments left one segment in 7 of 10 tries while they ran named).
    barrier();
  } catch (...) {  // a peer died or failed before unlinking its name: remove it for it
    for (int r = 0; r < world_size; ++r)
      if (r != rank) shm::Segment::unlink_name(recs[r].shm_name);
    throw;
  }
  // Every name, not only this rank's: a rank killed in the barrier, after its peers had its
  // frame, leaves its own behind otherwise (unlinking a removed name does nothing).
  segments[rank].unlink();
  for (int r = 0; r < world_size; ++r)
    if (r != rank) shm::Segment::unlink_name(recs[r].shm_name);
  // The cores the group may run on: the union of its ranks' CPU sets (ranks confined
  // together to a cpuset share its cores however many are online), else the online cores;
  // and those its ranks' calling threads, which wait on the peers, run on (fewer where
  // OMP_PROC_BIND pinned every rank's first thread to the first place).
  std::vector<std::string> cpu_lists, thread_cpu_lists;
  for (const RankRecord& r : recs) {
    cpu_lists.push_back(r.cpus);
    thread_cpu_lists.push_back(r.thread_cpus);
  }
  const HostCores cores = comm::host_cores(cpu_lists, thread_cpu_lists);
  const bool oversubscribed = world_size > cores.waiting;
  if (rank == 0) warn_if_affinity_short(world_size, cores);
  // Before any slot carries data (the probe uses their first words as scratch).
  const double sync_us = oversubscribed ? -1 : shm::measure_rank_sync_us(rank, segments);
  GroupVerdicts verdicts =
      agree_on_measures(rank, recs, all_gather, oversubscribed, sync_us, cores.cores);
  shm::CmaSupport& cma = verdicts.cma;
  // Where CMA reads go slow (once per process, about 10 ms), here rather than in a call.
  if (cma.unavailable.empty()) shm::cma_slow_distances();
  barrier();  // peers must not see a half-initialised comm fail before this point

  char name[64];
  std::snprintf(name, sizeof(name), "commfuse-%016llx-w%d",
                static_cast<unsigned long long>(recs[0].group_id), world_size);
  auto transport_impl =
      std::make_unique<shm::ShmTransport>(rank, std::move(segments), std::move(procs), slot_bytes,
                                          cores.waiting, cma, verdicts.direct_calls);
  // Sharing cores: all_to_all's CMA crossover and all_reduce's two-shot size from timing
  // both ways on the group (the cost models were 4-16x off there, shm_crossover.cpp); not
  // all_to_all where CMA is unavailable, or where COMMFUSE_ALGO pins it (a test setting:
  // the all-to-all streams then keep the estimate). (Oversubscribed implies 2+ ranks.)
  const bool measured =
      oversubscribed && cma.unavailable.empty() && forced_algorithm("all_to_all").empty();
  if (oversubscribed) {
    transport_impl->measure_shared_cores(measured, forced_algorithm("all_reduce").empty());
    cma.min_bytes = transport_impl->cma_min_bytes();
  }
  CF_LOG(kInfo, "comm ", name, ": rank ", rank, "/", world_size, " on shm (slot ", slot_bytes,
         " bytes", oversubscribed ? ", oversubscribed" : "", ", CMA ",
         cma.unavailable.empty() ? detail::cat("where it saves ", cma.min_bytes, " bytes")
                                 : "unavailable: " + cma.unavailable,
         ")");
  if (log::verbose_level() >= 1 && rank == 0)
    log::verbose(detail::cat(
        "comm ", name, ": CMA single-copy ",
        cma.unavailable.empty()
            ? detail::cat(
                  "available, used where it saves ", cma.min_bytes, " bytes of copying per rank (",
                  measured
                      ? std::string("ranks share cores: all_to_all timed both ways")
                      : detail::cat("rank 0-1 synchronization measured: ",
                                    sync_us >= 0 ? detail::cat(sync_us, " us") : std::string("no")),
                  ")")
            : "unavailable (" + cma.unavailable + "): the slots carry all",
        oversubscribed || world_size < 2
            ? std::string()
            : detail::cat("; rank 0's few-rows model: ", world_size,
                          " direct-kernel calls of m 16-bit rows beat one call of the ",
                          "gathered rows ", describe_direct_calls(verdicts.direct_calls))));
  return std::make_unique<CommImpl>(rank, world_size, world_size, name, std::move(transport_impl),
                                    cores.cores);
}

namespace {

std::unique_ptr<CommImpl> create_tcp_comm(const InitMethod& im) {
  // The parameters are checked before the group forms and the verdict is the group's first
  // exchange, as create_mpi_comm does: a bad value on rank r alone had left the others
  // waiting out their timeout ("rank r did not connect"). With a bad COMMFUSE_TIMEOUT_S the
  // group still forms within the default.
  int timeout = 300;
  Status code = Status::kSuccess;
  std::string error;
  try {
    timeout = params::timeout_seconds();
    check_comm_params();
    CF_CHECK_ARG(params::get_string("COMMFUSE_TRANSPORT") != "mpi", "comm init(rank ", im.rank,
                 "): COMMFUSE_TRANSPORT=mpi needs init_method \"mpi\" (run under mpirun)");
  } catch (const Error& e) {
    code = e.code();
    error = e.what();
  }
  // boot lives until create_shm_comm returns; its destructor frees the port. A rank whose
  // own check failed reports that, also where the group could not form to hear it.
  std::unique_ptr<Bootstrap> boot;
  std::vector<std::string> verdicts;
  try {
    boot = Bootstrap::create(im.host, im.port, im.rank, im.world_size, timeout);
    verdicts = boot->all_gather(error);
  } catch (const Error& e) {
    if (code == Status::kSuccess) throw;
    detail::throw_status(
        code, detail::cat(error, " (the group did not form to hear it: ", e.what(), ")"));
  }
  if (code != Status::kSuccess) detail::throw_status(code, error);
  for (int r = 0; r < im.world_size; ++r)
    if (!verdicts[static_cast<size_t>(r)].empty())
      detail::throw_status(Status::kRuntimeError,
                           detail::cat("comm init(rank ", im.rank, "): rank ", r,
                                       " failed: ", verdicts[static_cast<size_t>(r)]));
  return create_shm_comm(
      im.rank, im.world_size, [&](const std::string& blob) { return boot->all_gather(blob); },
      [&] { boot->barrier(); });
}

}  // namespace

std::unique_ptr<CommImpl> create_mpi_comm(int rank, int world_size);  // comm/mpi

void check_param(std::string_view env) {
  params::check(env);
  if (env == "COMMFUSE_TRACE") {
    // A trace file this process cannot write: tracing (which may not throw) had only logged a
    // warning and stopped, and the run ended with exit 0 and no trace.
    if (const std::string trace = params::get_string(env); !trace.empty())
      if (const std::string why = trace::path_problem(trace); !why.empty())
        detail::throw_status(Status::kParamInvalid,
                             detail::cat("COMMFUSE_TRACE='", trace, "' cannot be written: ", why));
  } else if (env == "COMMFUSE_FAULT") {
    check_fault_param();
  } else if (env == "COMMFUSE_MAX_CPU_ISA") {
    cpu::isa_level_from_name(params::get_string(env));
  } else if (env == "COMMFUSE_ALGO") {
    check_forced_algorithms();
    shm::check_shm_algorithms();
  } else if (env == "COMMFUSE_NONTEMPORAL_BYTES") {
    kernels::cpu::nontemporal_copy_bytes();
  } else if (env == "COMMFUSE_COPY_LOOP") {
    kernels::cpu::memcpy_slow_distances();  // (and measures, once per process)
  } else if (env == "COMMFUSE_HOST_ID") {
    check_host_id();
  }
}

void check_comm_params() {
  for (const params::Param& p : params::all()) check_param(p.env);
}

std::unique_ptr<CommImpl> create_comm(int rank, int world_size, std::string_view init_method) {
  // Set-up's timings (rank 0's few-rows model) may start the OpenMP pool, whose threads keep
  // the mode they are created in: IEEE defaults, whatever the caller set.
  const simd::StandardFloatMode fp_mode;
  const InitMethod im = parse_init_method(init_method, rank, world_size);
  // Over MPI inside create_mpi_comm's set-up exchange, so that a bad value on some ranks fails
  // every rank at once (here it left the others waiting out their timeout).
  if (im.kind == InitKind::kMpi) return create_mpi_comm(rank, world_size);
  log::set_rank(im.rank);
  return create_tcp_comm(im);
}

std::string init_method_from_env() {
  const bool have_rank = std::getenv("RANK") != nullptr;
  const bool under_mpi =
      std::getenv("OMPI_COMM_WORLD_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr;
  return !have_rank && under_mpi ? "mpi" : "env://";
}

}  // namespace commfuse::comm
