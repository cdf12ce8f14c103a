// commfuse::Comm: argument validation for the collectives (all of it before any
// communication), the name registry, and dispatch to the transport.
#include <commfuse/commfuse.hpp>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "comm/comm_impl.hpp"
#include "core/dtype_valid.hpp"
#include "core/error.hpp"
#include "core/simd.hpp"
#include "core/trace.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/threads.hpp"

namespace commfuse {
namespace comm {
namespace {

// Live communicators by name. Guarded: comms may be created from several threads.
std::mutex g_registry_mu;
std::map<std::string, Comm*, std::less<>> g_registry;
// Bumped (under the mutex) whenever a communicator comes or goes: a thread's last lookup
// (find_comm) stays valid while it is unchanged.
std::atomic<uint64_t> g_registry_generation{1};

// The calling thread's last find_comm: every operator call looks its group up, and a tiny
// op measured the mutex and the map as part of its fixed cost.
// Trivially destructible: an op may run from a static destructor, after thread-locals with
// destructors are gone; the name is the communicator's own, alive while the generation holds.
struct LastLookup {
  uint64_t generation = 0;
  Comm* comm = nullptr;
};
thread_local LastLookup t_last_lookup;

// Bumped in every child fork() makes. A communicator belongs to the process that created it:
// a child calling on its parent's (the same shared control block) published steps for the
// parent's rank, so the parent's next call failed on one rank and "succeeded" on another.
// Compared on every call, so a relaxed load, not a getpid() system call.
std::atomic<uint64_t> g_fork_generation{0};

void count_fork() {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
}

uint64_t fork_generation() {
  static const bool registered = (pthread_atfork(nullptr, nullptr, count_fork), true);
  (void)registered;
  return g_fork_generation.load(std::memory_order_relaxed);
}

}  // namespace

void check_not_forked(const CommImpl& c, const char* op) {
  if (c.fork_generation() == g_fork_generation.load(std::memory_order_relaxed)) return;
  detail::throw_status(
      Status::kParamInvalid,
      detail::cat(op, "(rank ", c.rank(),
                  "): this process is a fork() child of the process that "
                  "created the communicator, which stays that process's: create one of its own"));
}

CommImpl::CommImpl(int rank, int world_size, int local_ranks, std::string name,
                   std::unique_ptr<Transport> transport, int host_cores)
    : rank_(rank),
      world_size_(world_size),
      local_ranks_(local_ranks),
      name_(std::move(name)),
      transport_(std::move(transport)),
      fork_generation_(comm::fork_generation()) {
  // Ranks on one host share its cores: the compute kernels take their share.
  kernels::cpu::set_local_ranks(local_ranks, host_cores);
  trace::set_rank(rank);  // COMMFUSE_TRACE: this process's track is named by its rank
}

CommImpl::~CommImpl() {
  if (fork_generation_ != g_fork_generation.load(std::memory_order_relaxed)) return;
  const std::thread::id me = std::this_thread::get_id();
  bool told = false;
  for (std::thread::id none; !caller_.compare_exchange_strong(none, me, std::memory_order_acquire);
       none = std::thread::id()) {
    if (none == me) {  // no API lets a call destroy its own communicator: a bug, said loudly
      std::fprintf(stderr,
                   "commfuse: rank %d: communicator %s destroyed from within a call on it by "
                   "the same thread\n",
                   rank_, name_.c_str());
      std::abort();
    }
    if (!told)
      transport_->abort(detail::cat("rank ", rank_,
                                    " destroyed the communicator while another thread was in a "
                                    "call on it"));
    told = true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  attachment_.reset();  // it may still talk to the peers (its own order, before the transport)
  transport_->closing(detail::cat("rank ", rank_, " destroyed the communicator"));
}

CommImpl::Entered::Entered(CommImpl& c, const char* op) {
  check_not_forked(c, op);
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id none;
  if (c.caller_.compare_exchange_strong(none, me, std::memory_order_acquire)) {
    owner_ = &c;
    return;
  }
  if (none != me) throw_busy(op, c.rank_);
}

CommImpl::Entered::~Entered() {
  if (owner_ != nullptr) owner_->caller_.store(std::thread::id(), std::memory_order_release);
}

void CommImpl::reject(Status code, const std::string& message) {
  tell_rejected(message);
  detail::throw_status(code, message);
}

void CommImpl::tell_rejected(const std::string& message) {
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id none;
  if (caller_.compare_exchange_strong(none, me, std::memory_order_acquire)) {
    struct Leave {
      std::atomic<std::thread::id>& caller;
      ~Leave() { caller.store(std::thread::id(), std::memory_order_release); }
    } leave{caller_};
    transport_->reject(message);
  } else if (none == me) {
    transport_->reject(message);  // within this thread's own call (a collective's checks)
  }
}

}  // namespace comm

namespace {

bool valid_dtype(DType t) {
  try {
    dtype_bits(t);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Checks shared by every collective; `what` names the op for messages. blocks:
// count-element blocks in the call's larger buffer (all_gather's dst, reduce_scatter's
// src, all_to_all's: R; else 1). src_name, dst_name: the buffers' names in messages.
void check_buffers(comm::CommImpl& c, const char* what, const void* src, const void* dst,
                   size_t count, DType dtype, bool needs_sum, int blocks = 1,
                   const char* src_name = "src", const char* dst_name = "dst") {
  const int r = c.rank();
  if (!valid_dtype(dtype))
    c.reject(Status::kParamInvalid,
             detail::cat(what, "(rank ", r, "): dtype value ", static_cast<int>(dtype),
                         " is not a commfuse dtype"));
  // No buffer spans more than PTRDIFF_MAX bytes: a larger count would wrap the byte sizes
  // the transports compute (2^62 float32 made an all_reduce of 0 bytes), or make their
  // dtype_storage_bytes throw on this rank alone.
  if (auto refusal = detail::count_too_large(what, count, dtype, static_cast<size_t>(blocks), r);
      !refusal.empty())
    c.reject(Status::kParamInvalid, std::move(refusal));
  if (needs_sum && !kernels::cpu::reducible(dtype))
    c.reject(Status::kParamInvalid,
             detail::cat(what, "(rank ", r, "): dtype ", dtype_name(dtype),
                         " cannot be summed (only ", kernels::cpu::reducible_names(), ")"));
  if (dtype == DType::kInt4 && count % 2 != 0)
    c.reject(Status::kParamInvalid, detail::cat(what, "(rank ", r, "): int4 count ", count,
                                                " must be even (two elements per byte)"));
  if (count > 0 && src == nullptr)
    c.reject(Status::kParamNullptr,
             detail::cat(what, "(rank ", r, "): ", src_name, " is null (count ", count, ")"));
  if (count > 0 && dst == nullptr)
    c.reject(Status::kParamNullptr,
             detail::cat(what, "(rank ", r, "): ", dst_name, " is null (count ", count, ")"));
  // The sums read src while writing dst: in place (dst == src) is defined, a partial overlap
  // is not (it gave wrong sums on both transports).
  if (needs_sum && count > 0 && src != dst) {
    const size_t bytes = dtype_storage_bytes(dtype, count);
    if (comm::ranges_overlap(src, bytes * static_cast<size_t>(blocks), dst, bytes))
      c.reject(Status::kParamInvalid,
               detail::cat(what, "(rank ", r, "): ", dst_name, " overlaps ", src_name,
                           " without being it (in place, pass dst == src; else the buffers must "
                           "not overlap)"));
  }
}

}  // namespace

Comm::Comm(int rank, int world_size, std::string_view init_method)
    : Comm(comm::create_comm(rank, world_size, init_method)) {}

Comm::Comm(std::unique_ptr<comm::CommImpl> impl) : impl_(std::move(impl)) {
  std::lock_guard<std::mutex> lock(comm::g_registry_mu);
  // The operators find a communicator by its name, which the whole group shares: a second
  // rank of one group in this process (two threads as two ranks) would make `group` name
  // either, and an operator ran on the other rank's communicator until the timeout. Refused;
  // destroying impl_ tells this rank's peers (the first rank's calls fail at once).
  if (const auto it = comm::g_registry.find(impl_->name()); it != comm::g_registry.end())
    detail::throw_status(
        Status::kParamInvalid,
        detail::cat("comm init(rank ", impl_->rank(), "): this process already holds rank ",
                    it->second->rank(), " of this group (communicator '", impl_->name(),
                    "'): the operators find a communicator by its name, so a process holds one "
                    "rank of a group (run each rank in a process of its own)"));
  comm::g_registry[impl_->name()] = this;
  comm::g_registry_generation.fetch_add(1, std::memory_order_release);
}

std::unique_ptr<Comm> Comm::from_env() {
  return std::make_unique<Comm>(-1, -1, comm::init_method_from_env());
}

Comm::~Comm() {
  {
    std::lock_guard<std::mutex> lock(comm::g_registry_mu);
    comm::g_registry.erase(impl_->name());  // this Comm's entry: names are unique (Comm())
    comm::g_registry_generation.fetch_add(1, std::memory_order_release);
  }
  // impl_'s destructor then waits out a call in flight on another thread and tells the
  // peers (not reset() here: that nulls impl_ first, under the call still using it).
}

int Comm::rank() const {
  return impl_->rank();
}
int Comm::world_size() const {
  return impl_->world_size();
}
const std::string& Comm::name() const {
  return impl_->name();
}
const char* Comm::transport_name() const {
  return impl_->transport().name();
}

bool Comm::usable() const {
  return impl_->transport().usable();
}

std::string Comm::failure() const {
  return impl_->transport().failure();
}

void Comm::abort(std::string_view reason) {
  comm::check_not_forked(*impl_, "abort");
  impl_->transport().abort(detail::cat("rank ", rank(), " aborted the communicator: ",
                                       reason.empty() ? std::string_view("Comm::abort") : reason));
}

void Comm::barrier() {
  const comm::CommImpl::Entered entered(*impl_, "barrier");
  impl_->transport().barrier();
}

void Comm::broadcast(void* buf, size_t count, DType dtype, int root) {
  const comm::CommImpl::Entered entered(*impl_, "broadcast");
  check_buffers(*impl_, "broadcast", buf, buf, count, dtype, false, 1, "buf", "buf");
  if (root < 0 || root >= world_size())
    impl_->reject(Status::kParamInvalid, detail::cat("broadcast(rank ", rank(), "): root ", root,
                                                     " is not in [0, ", world_size(), ")"));
  impl_->transport().broadcast(buf, count, dtype, root);
}

void Comm::all_gather(const void* src, void* dst, size_t count, DType dtype) {
  const comm::CommImpl::Entered entered(*impl_, "all_gather");
  check_buffers(*impl_, "all_gather", src, dst, count, dtype, false, world_size());
  impl_->transport().all_gather(src, dst, count, dtype);
}

void Comm::reduce_scatter(const void* src, void* dst, size_t count, DType dtype) {
  const comm::CommImpl::Entered entered(*impl_, "reduce_scatter");
  const simd::StandardFloatMode fp_mode;  // the sums round to nearest even on every rank alike
  check_buffers(*impl_, "reduce_scatter", src, dst, count, dtype, true, world_size());
  impl_->transport().reduce_scatter(src, dst, count, dtype);
}

void Comm::all_reduce(const void* src, void* dst, size_t count, DType dtype) {
  const comm::CommImpl::Entered entered(*impl_, "all_reduce");
  const simd::StandardFloatMode fp_mode;  // the sums round to nearest even on every rank alike
  check_buffers(*impl_, "all_reduce", src, dst, count, dtype, true);
  impl_->transport().all_reduce(src, dst, count, dtype);
}

void Comm::all_to_all(const void* src, void* dst, size_t count, DType dtype) {
  const comm::CommImpl::Entered entered(*impl_, "all_to_all");
  check_buffers(*impl_, "all_to_all", src, dst, count, dtype, false, world_size());
  impl_->transport().all_to_all(src, dst, count, dtype);
}

Comm& find_comm(std::string_view name) {
  comm::LastLookup& last = comm::t_last_lookup;
  const uint64_t generation = comm::g_registry_generation.load(std::memory_order_acquire);
  if (last.comm != nullptr && last.generation == generation && last.comm->name() == name)
    return *last.comm;
  std::lock_guard<std::mutex> lock(comm::g_registry_mu);
  auto it = comm::g_registry.find(name);
  if (it == comm::g_registry.end()) {
    std::string known;
    for (const auto& [n, c] : comm::g_registry) known += detail::cat(known.empty() ? "" : ", ", n);
    detail::throw_status(Status::kParamInvalid,
                         detail::cat("unknown group '", name, "' (live communicators: ",
                                     known.empty() ? "none" : known, ")"));
  }
  // The generation read under the mutex: no communicator came or went since.
  last.generation = comm::g_registry_generation.load(std::memory_order_relaxed);
  last.comm = it->second;
  return *it->second;
}

}  // namespace commfuse
