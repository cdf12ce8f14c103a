#if COMMFUSE_HAVE_MPI
#include "comm/mpi/mpi_transport.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <utility>

#include "comm/fault.hpp"
#include "comm/mpi/mpi_pipeline.hpp"
#include "comm/mpi/mpi_requests.hpp"
#include "comm/mpi/mpi_thread_gate.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/small_vector.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/reduce.hpp"

namespace commfuse::comm::mpi {
namespace {

// Tags keep descriptors and data apart: a fast rank may send the next op's descriptor
// while a slow one still receives this op's data.
constexpr int kDescTag = 1;
constexpr int kDataTag = 2;

// Up to this many bytes an all-reduce gathers every rank's whole input and sums locally
// (one round of messages); above it, reduce-scatter + all-gather (each rank sends and
// receives about 2N instead of R·N).
constexpr size_t kSmallAllReduceBytes = 64 * 1024;
// Reductions run in pieces whose received blocks total at most this, bounding scratch.
constexpr size_t kScratchBytes = size_t{32} << 20;
// all_reduce's pipelined pieces: each rank's slice of a piece (all_reduce_large).
constexpr size_t kPipeSliceBytes = size_t{1} << 20;

// Bytes of the descriptor header: what travels unless the sender failed or sends data.
constexpr int kDescHeaderBytes = static_cast<int>(offsetof(WireDesc, reason));
static_assert(kDescHeaderBytes % 8 == 0, "inline data stays 8-byte aligned");
static_assert(kDescHeaderBytes == 144, "docs/algorithms.md gives a barrier's bytes");
// The descriptor receives are posted for inbox_stride_ bytes, the header plus inline data
// rounded up to 64: within one eager piece, so that Batch never splits them (mpi_requests.hpp).
static_assert(kInlineMessageBytes % 64 == 0 && kInlineMessageBytes <= kEagerMessageBytes,
              "a descriptor receive stays one piece");

size_t elem_bytes(DType t) {
  return static_cast<size_t>(dtype_bits(t) / 8);
}

// Slice q of n elements split as evenly as possible over `parts`.
void slice(uint64_t n, int parts, int q, uint64_t* off, uint64_t* len) {
  const uint64_t base = n / static_cast<uint64_t>(parts);
  const uint64_t rem = n % static_cast<uint64_t>(parts);
  const auto uq = static_cast<uint64_t>(q);
  *off = uq * base + std::min(uq, rem);
  *len = base + (uq < rem ? 1 : 0);
}

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm, bool oversubscribed, bool progress_thread)
    : comm_(comm),
      waits_{params::timeout_seconds(), oversubscribed, &failure_, progress_thread},
      caller_(std::this_thread::get_id()) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  descs_.resize(static_cast<size_t>(size_));
  const size_t R = static_cast<size_t>(size_);
  // No inline data where a rank's share of the inbox does not hold the header (R >= 21846
  // wrapped this to ~2^64, every transfer "fit" and overflowed the outbox).
  const size_t share = std::min(kInlineMessageBytes, kInboxBytes / R / 64 * 64);
  inline_bytes_ = share > kDescHeaderBytes ? share - kDescHeaderBytes : 0;
  inbox_stride_ = (std::max(sizeof(WireDesc), kDescHeaderBytes + inline_bytes_) + 63) / 64 * 64;
  inbox_.resize(inbox_stride_ * R);
}

MpiTransport::~MpiTransport() {
  // A communicator kept past exit (a static) may outlive MPI itself.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // An abort from another thread between calls that no call told the peers yet: peers in a
  // call get it at once; ones that are not (destroying too, say) are not waited for long.
  int s = kUntold;
  if (state_.compare_exchange_strong(s, kClosed, std::memory_order_acq_rel)) tell_peers_failed(1);
  MPI_Comm_free(&comm_);
  // Receives released unfinished after a failure (Pipeline, Batch::cancel) may still land in
  // the transport's buffers while the stalled peer lives: those are kept, not freed under MPI.
  if (peer_unresponsive()) {
    keep_until_exit(std::shared_ptr<uint8_t[]>(std::move(stream_buf_)));
    keep_until_exit(std::make_shared<std::vector<uint8_t>>(std::move(scratch_)));
  }
}

uint8_t* MpiTransport::stream_buffer(size_t bytes) {
  if (bytes > stream_cap_) {
    stream_buf_ = std::make_unique_for_overwrite<uint8_t[]>(bytes);
    stream_cap_ = bytes;
  }
  return stream_buf_.get();
}

const void* MpiTransport::staged_source(const char* op, const void* src, size_t src_bytes,
                                        const void* dst, size_t dst_bytes, const void* own,
                                        std::unique_ptr<uint8_t[]>& staged) {
  if (src == own) return src;
  const void* from = src;
  if (!copy_if_overlapping(&from, src_bytes, dst, dst_bytes, staged)) {
    const std::string why =
        detail::cat(op, "(rank ", rank_, "): out of memory allocating ", src_bytes,
                    " bytes to stage the source of an in-place call (blocks "
                    "arrive in the destination while it is sent)");
    reject(why);
    detail::throw_status(Status::kRuntimeError, why);
  }
  return from;
}

uint8_t* MpiTransport::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

template <typename Body>
void MpiTransport::run(const CollDesc& desc, Body&& body) {
  run(desc, InlineSend{}, std::forward<Body>(body));
}

template <typename Body>
void MpiTransport::run(const CollDesc& desc, const InlineSend& data, Body&& body) {
  run(desc, data, EarlySend{}, std::forward<Body>(body));
}

template <typename Body>
void MpiTransport::run(const CollDesc& desc, const InlineSend& data, const EarlySend& early,
                       Body&& body) {
  const char* op = coll_op_name(desc.op);
  refuse_after_finalize(op);
  const MpiThreadGate gate(op, rank_);  // refused before anything is counted
  if (!enter_call()) {
    check_usable(op, rank_, failure_);
    throw_busy(op, rank_);
  }
  fault_point(rank_, op, 0);  // the streams' later pieces: mpi_stream.cpp
  ++op_seq_;
  try {
    // The header zeroed, not the 464 bytes of reason that a working call never sends.
    WireDesc mine;
    std::memset(&mine, 0, kDescHeaderBytes);
    fill_wire(mine, static_cast<uint32_t>(desc.op), desc, op_seq_);
    std::optional<Batch> sent;  // early's blocks
    if (early.base != nullptr) {
      CF_ASSERT(early.bytes <= kMaxEarlyBytes);
      mine.early = static_cast<uint32_t>(early.bytes);
      sent.emplace(comm_, kDataTag, rank_, op, waits_);
    }
    exchange_descriptors(mine, op, waits_, data, early, sent ? &*sent : nullptr);
    try {
      check_descriptors(desc, op);
    } catch (const CallFailed&) {  // every rank drains what its peers sent early, alike
      drain_early(op);
      if (sent) sent->wait();
      throw;
    }
    body(op);
    if (sent) sent->wait();
    // Aborted from another thread during the call (which completed): it fails here, and the
    // peers have been told (leave_call).
    if (!leave_call())
      detail::throw_status(Status::kRuntimeError,
                           detail::cat(op, "(rank ", rank_, "): ", failure_.reason()));
  } catch (const CallFailed&) {  // every rank failed it after the descriptors: still usable
    leave_call();
    throw;
  } catch (const std::exception& e) {  // ours, or one a stream callback let through
    // A failed peer fails everyone alike; after a timeout (or an abort from another thread,
    // which ends the waits) MPI's state is unknown. Either way nothing more is sent.
    failure_.set(e.what());
    state_.store(kClosed, std::memory_order_release);
    rethrow_in_call();
  } catch (...) {  // a callback threw something else: the same, and the call state cleared
    failure_.set(detail::cat(op, "(rank ", rank_, "): a callback threw a non-standard exception"));
    state_.store(kClosed, std::memory_order_release);
    throw;
  }
}

void MpiTransport::run_fn(const CollDesc& desc, const std::function<void(const char*)>& body) {
  run(desc, body);
}

void MpiTransport::run_alone(const CollDesc& desc, void* dst, const void* src, size_t bytes) {
  run(desc, [&](const char*) { kernels::cpu::copy(dst, src, bytes); });
}

void MpiTransport::exchange_descriptors(const WireDesc& mine, const char* op,
                                        const WaitRules& rules, const InlineSend& data,
                                        const EarlySend& early, Batch* sent) {
  const bool has_reason = mine.op == 0 || mine.op == kRejectedOp;
  const int bytes = has_reason ? kDescHeaderBytes + static_cast<int>(std::strlen(mine.reason)) + 1
                               : kDescHeaderBytes;
  Batch b(comm_, kDescTag, rank_, op, rules);
  // Every receive takes the largest message a peer may send, whatever call it is in.
  for (int i = 1; i < size_; ++i) {
    const int q = (rank_ + i) % size_;
    b.recv(q, inbox_.data() + q * inbox_stride_, inbox_stride_);
  }
  if (data.base == nullptr || has_reason) {
    for (int i = 1; i < size_; ++i) b.send((rank_ + i) % size_, &mine, static_cast<size_t>(bytes));
  } else {
    // header + data in one message per peer; the outbox outlives the sends.
    outbox_.resize(inbox_stride_ * static_cast<size_t>(size_));
    for (int i = 1; i < size_; ++i) {
      const int q = (rank_ + i) % size_;
      uint8_t* msg = outbox_.data() + q * inbox_stride_;
      std::memcpy(msg, &mine, kDescHeaderBytes);
      const uint8_t* from =
          data.slices ? data.base + data.slices[2 * q] : data.base + q * data.stride;
      const size_t n = data.slices ? data.slices[2 * q + 1] : data.bytes;
      kernels::cpu::copy(msg + kDescHeaderBytes, from, n);
      b.send(q, msg, kDescHeaderBytes + n);
    }
  }
  // After the descriptors, so that the descriptors are not queued behind the blocks.
  if (sent != nullptr)
    for (int i = 1; i < size_; ++i) {
      const int q = (rank_ + i) % size_;
      sent->send(q, early.base + q * early.stride, early.bytes);
    }
  b.wait();
  // The header only, unless the peer failed or rejected (then its reason too): a 64 B call
  // over TCP takes ~4.5 us, and copying 464 unused bytes per peer showed in its profile.
  for (int i = 1; i < size_; ++i) {
    const int q = (rank_ + i) % size_;
    const uint8_t* msg = inbox_.data() + q * inbox_stride_;
    uint32_t peer_op = 0;
    std::memcpy(&peer_op, msg + offsetof(WireDesc, op), sizeof peer_op);
    const bool reason = peer_op == 0 || peer_op == kRejectedOp;
    std::memcpy(&descs_[q], msg, reason ? sizeof(WireDesc) : kDescHeaderBytes);
  }
  std::memcpy(&descs_[rank_], &mine, has_reason ? sizeof(WireDesc) : kDescHeaderBytes);
}

EarlySend MpiTransport::early_blocks(const void* src, size_t bytes, size_t stride) const {
  if (size_ == 1 || bytes > kMaxEarlyBytes) return {};  // the body sends them
  return {static_cast<const uint8_t*>(src), bytes, stride};
}

void MpiTransport::drain_early(const char* op) {
  // Piece by piece (each its own message, split as the sender's Batch split it), one at a
  // time into one bounded buffer: pending receives must not share a buffer, and a peer's
  // 4 GiB of blocks must not need 4 GiB here.
  for (int i = 1; i < size_; ++i) {
    const int q = (rank_ + i) % size_;
    if (descs_[q].op == 0 || descs_[q].early == 0) continue;  // a failed rank sent nothing
    const size_t bytes = descs_[q].early, piece = message_piece_bytes(bytes);
    uint8_t* buf = scratch(std::min(bytes, piece));
    for (size_t off = 0; off < bytes; off += piece) {
      Batch b(comm_, kDataTag, rank_, op, waits_);
      b.recv_piece(q, buf, std::min(piece, bytes - off));
      b.wait();
    }
  }
}

const uint8_t* MpiTransport::inline_data(int q) const {
  return inbox_.data() + q * inbox_stride_ + kDescHeaderBytes;
}

void MpiTransport::check_descriptors(const CollDesc& desc, const char* op) {
  check_call(op, rank_, size_, desc, [&](int r) -> const WireDesc& { return descs_[r]; });
}

bool MpiTransport::enter_call() {
  int s = kIdle;
  if (!failure_.failed() && state_.compare_exchange_strong(s, kInCall, std::memory_order_acq_rel)) {
    caller_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  s = kUntold;
  if (state_.compare_exchange_strong(s, kClosed, std::memory_order_acq_rel))
    tell_peers_failed(waits_.timeout_s);
  return false;
}

bool MpiTransport::leave_call() {
  int s = kInCall;
  if (state_.compare_exchange_strong(s, kIdle, std::memory_order_acq_rel)) return true;
  // kAbortedInCall: the call's messages are complete, and this is the calling thread.
  state_.store(kClosed, std::memory_order_release);
  tell_peers_failed(waits_.timeout_s);
  return false;
}

void MpiTransport::tell_peers_failed(int timeout_s) {
  // The peers are (or will be) in the descriptor exchange of the collective this rank is
  // refusing: take part in it with a "failed" descriptor so they fail at once naming this
  // rank. Bounded by the deadline; never throws.
  WireDesc mine{};
  mine.op = 0;
  mine.op_seq = op_seq_ + 1;
  detail::copy_message(mine.reason, sizeof(mine.reason), failure_.reason());
  try {
    exchange_descriptors(mine, "abort", WaitRules{timeout_s, waits_.oversubscribed});
  } catch (const Error& e) {
    CF_LOG(kWarn, "could not tell the peers that rank ", rank_, " failed: ", e.what());
  }
}

void MpiTransport::refuse_after_finalize(const char* op) {
  int finalized = 0;
  MPI_Finalized(&finalized);  // callable at any time, unlike every other MPI call
  if (finalized == 0) return;
  const std::string why =
      detail::cat(op, "(rank ", rank_,
                  "): MPI_Finalize was called in this process, so its MPI communicators can "
                  "make no more calls");
  failure_.set(why);  // for good: usable() says so
  detail::throw_status(Status::kRuntimeError, why);
}

void MpiTransport::abort(const std::string& reason) {
  // peers already know, or the transport is past talking
  if (!failure_.set(reason)) return;
  // After the program's own MPI_Finalize nothing can be sent (MPI's handler ended the job).
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) {
    state_.store(kClosed, std::memory_order_release);
    return;
  }
  // MPI is initialized MPI_THREAD_SERIALIZED: only the thread that makes this
  // communicator's calls may send (unless MPI allows every thread). From another thread
  // the abort only changes the state, and the calling thread tells the peers: at the end of
  // the call in flight if it completes (a call whose wait the abort ended sends nothing
  // more), else at its next call or at destroy.
  const bool may_send = mpi_allows_any_thread() ||
                        caller_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  int s = state_.load(std::memory_order_acquire);
  while (true) {
    if (s == kIdle) {
      if (!state_.compare_exchange_weak(s, may_send ? kClosed : kUntold, std::memory_order_acq_rel))
        continue;
      if (may_send) tell_peers_failed(waits_.timeout_s);
      return;
    }
    if (s != kInCall || state_.compare_exchange_weak(s, kAbortedInCall, std::memory_order_acq_rel))
      return;
  }
}

void MpiTransport::reject(const std::string& reason) {
  // Another thread of this process in MPI (below MPI_THREAD_MULTIPLE): nothing can be sent;
  // the peers fail the call at their deadline.
  std::optional<MpiThreadGate> gate;
  try {
    refuse_after_finalize("reject");
    gate.emplace("reject", rank_);
  } catch (const Error&) {
    return;
  }
  // Unusable (closed by an abort, too): the peers have been told already, or will be.
  if (!enter_call()) return;
  // The descriptor exchange of the call the peers are making, with a "rejected" descriptor:
  // they fail the call naming this rank, and nothing else is sent; the blocks they sent
  // early are drained, so the next call's messages match as usual. This rank waits for
  // their descriptors (the exchange is symmetric), which also tells it of a peer that
  // failed meanwhile: then the call is fatal on every rank (fail_call checks for a failed
  // peer first), and no rank drains.
  ++op_seq_;
  WireDesc mine{};
  fill_wire(mine, kRejectedOp, CollDesc{}, op_seq_);
  detail::copy_message(mine.reason, sizeof(mine.reason), reason);
  try {
    exchange_descriptors(mine, "reject", waits_);
    bool peer_failed = false;
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && descs_[r].op == 0) {
        peer_failed = true;
        failure_.set(
            detail::cat("rank ", r, " failed: ",
                        std::string_view(descs_[r].reason,
                                         strnlen(descs_[r].reason, sizeof descs_[r].reason))));
      }
    // Calls out of step around the rejection: the peers find the communicator unusable
    // (fail_call), and so must this rank, whose next call they would otherwise never answer.
    if (!peer_failed &&
        calls_out_of_step(size_, [&](int r) -> const WireDesc& { return descs_[r]; })) {
      peer_failed = true;  // no rank drains: the call is fatal on every rank
      failure_.set(detail::cat("reject(rank ", rank_,
                               "): the ranks' calls went out of step at the call this rank "
                               "rejected (its peers made different calls; the communicator is "
                               "unusable)"));
    }
    if (!peer_failed) drain_early("reject");
  } catch (const std::exception& e) {  // bad_alloc too: never left in the call
    failure_.set(e.what());
    state_.store(kClosed, std::memory_order_release);
    CF_LOG(kWarn, "could not tell the peers that rank ", rank_, " rejected its call: ", e.what());
    return;
  }
  leave_call();  // an abort meanwhile is told now
}

void MpiTransport::barrier() {
  // The descriptor exchange is a barrier: no rank gets past it before every rank arrived.
  run(CollDesc{CollOp::kBarrier, DType::kInt8, 0, -1}, [](const char*) {});
}

void MpiTransport::broadcast(void* buf, uint64_t count, DType dtype, int root) {
  const size_t bytes = dtype_storage_bytes(dtype, count);
  const bool small = fits_inline(bytes);
  InlineSend data;
  if (small && rank_ == root) data = {static_cast<const uint8_t*>(buf), bytes, 0};
  run(CollDesc{CollOp::kBroadcast, dtype, count, root}, data, [&](const char* op) {
    if (bytes == 0 || size_ == 1) return;
    if (small) {  // the root's descriptor message brought the data
      if (rank_ != root) kernels::cpu::copy(buf, inline_data(root), bytes);
      return;
    }
    // Binomial tree rooted at root: ceil(log2 R) rounds, each rank sends at most that many
    // copies. v is this rank's distance from the root.
    const int v = (rank_ - root + size_) % size_;
    int mask = 1;
    while (mask < size_ && (v & mask) == 0) mask <<= 1;
    if (v != 0) {
      Batch up(comm_, kDataTag, rank_, op, waits_);
      up.recv((v - mask + root) % size_, buf, bytes);
      up.wait();
    }
    Batch down(comm_, kDataTag, rank_, op, waits_);
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (v + mask < size_) down.send((v + mask + root) % size_, buf, bytes);
    down.wait();
  });
}

namespace {

// This rank's own block, copied while the batch's transfers are under way: in pieces, with
// a progress call after each, since Open MPI's TCP transport moves bytes only inside MPI
// calls and a copy of megabytes in one go held the transfers back that long.
void copy_progressing(Batch& b, uint8_t* dst, const uint8_t* src, size_t bytes) {
  constexpr size_t kPiece = size_t{256} << 10;
  for (size_t off = 0; off < bytes; off += kPiece) {
    kernels::cpu::copy(dst + off, src + off, std::min(kPiece, bytes - off));
    if (off + kPiece < bytes) b.progress();
  }
}

// The private copy an in-place call sends from (staged_source): kept until exit where the
// call left the transport failed, because sends from it, which MPI cannot cancel, may still
// be read (all_gather's and all_to_all's go before the descriptors are checked).
class StagedSource {
 public:
  explicit StagedSource(const Failure& failure) : failure_(failure) {}
  ~StagedSource() {
    if (buf && failure_.failed()) keep_until_exit(std::shared_ptr<uint8_t[]>(std::move(buf)));
  }
  StagedSource(const StagedSource&) = delete;
  StagedSource& operator=(const StagedSource&) = delete;
  std::unique_ptr<uint8_t[]> buf;

 private:
  const Failure& failure_;
};

}  // namespace

void MpiTransport::all_gather(const void* src, void* dst, uint64_t count, DType dtype) {
  const size_t bytes = dtype_storage_bytes(dtype, count);
  if (size_ == 1) return run_alone(CollDesc{CollOp::kAllGather, dtype, count, -1}, dst, src, bytes);
  const bool small = fits_inline(bytes);
  const InlineSend data =
      small ? InlineSend{static_cast<const uint8_t*>(src), bytes, 0} : InlineSend{};
  // A source inside a peer's block of dst is overwritten by that block while it is still
  // being sent: sent from a copy (at its own block it only receives itself).
  StagedSource staged(failure_);
  if (!small)
    src = staged_source("all_gather", src, bytes, dst, size_ * bytes,
                        static_cast<uint8_t*>(dst) + rank_ * bytes, staged.buf);
  const EarlySend early = small ? EarlySend{} : early_blocks(src, bytes, 0);
  run(CollDesc{CollOp::kAllGather, dtype, count, -1}, data, early, [&](const char* op) {
    if (bytes == 0) return;
    auto* out = static_cast<uint8_t*>(dst);
    if (small) {  // src is in the outbox already: in place, its block may be overwritten
      gather_inline(static_cast<const uint8_t*>(src), out, bytes);
      return;
    }
    Batch b(comm_, kDataTag, rank_, op, waits_);
    for (int i = 1; i < size_; ++i) {
      const int q = (rank_ + i) % size_;
      b.recv(q, out + q * bytes, bytes);
      if (early.base == nullptr) b.send(q, src, bytes);
    }
    copy_progressing(b, out + rank_ * bytes, static_cast<const uint8_t*>(src), bytes);
    b.wait();
  });
}

void MpiTransport::all_to_all(const void* src, void* dst, uint64_t count, DType dtype) {
  const size_t bytes = dtype_storage_bytes(dtype, count);
  if (size_ == 1) return run_alone(CollDesc{CollOp::kAllToAll, dtype, count, -1}, dst, src, bytes);
  const bool small = fits_inline(bytes);
  const InlineSend data =
      small ? InlineSend{static_cast<const uint8_t*>(src), bytes, bytes} : InlineSend{};
  // In place, a block may arrive before this rank's block for that peer has gone out.
  StagedSource staged(failure_);
  if (!small)
    src = staged_source("all_to_all", src, size_ * bytes, dst, size_ * bytes, nullptr, staged.buf);
  const EarlySend early = small ? EarlySend{} : early_blocks(src, bytes, bytes);
  run(CollDesc{CollOp::kAllToAll, dtype, count, -1}, data, early, [&](const char* op) {
    if (bytes == 0) return;
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    if (small) {  // the blocks for the peers went with the descriptors: in place is safe
      gather_inline(in + rank_ * bytes, out, bytes);
      return;
    }
    Batch b(comm_, kDataTag, rank_, op, waits_);
    for (int i = 1; i < size_; ++i) {
      // Receive from the rank i behind, send to the rank i ahead: every rank talks to a
      // different peer at a time instead of all sending to rank 0 first.
      b.recv((rank_ - i + size_) % size_, out + ((rank_ - i + size_) % size_) * bytes, bytes);
      if (early.base == nullptr)
        b.send((rank_ + i) % size_, in + ((rank_ + i) % size_) * bytes, bytes);
    }
    copy_progressing(b, out + rank_ * bytes, in + rank_ * bytes, bytes);
    b.wait();
  });
}

void MpiTransport::reduce_scatter(const void* src, void* dst, uint64_t count, DType dtype) {
  check_reducible("reduce_scatter", rank_, dtype);
  const size_t es = elem_bytes(dtype);
  if (size_ == 1)
    return run_alone(CollDesc{CollOp::kReduceScatter, dtype, count, -1}, dst, src, count * es);
  const bool small = fits_inline(count * es);
  const InlineSend data =
      small ? InlineSend{static_cast<const uint8_t*>(src), count * es, count * es} : InlineSend{};
  run(CollDesc{CollOp::kReduceScatter, dtype, count, -1}, data, [&](const char* op) {
    if (small) {
      reduce_inline(static_cast<const uint8_t*>(src) + rank_ * count * es, dst, count, dtype);
      return;
    }
    const uint64_t piece = std::max<uint64_t>(1, kScratchBytes / size_ / es);
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    SmallVector<const void*, 16> parts(static_cast<size_t>(size_));
    for (uint64_t off = 0; off < count; off += piece) {
      // Block r of every rank's input, piece [off, off + n), lands at parts[r].
      const uint64_t n = std::min(piece, count - off);
      uint8_t* blocks = scratch(size_ * n * es);
      Batch b(comm_, kDataTag, rank_, op, waits_);
      for (int i = 1; i < size_; ++i) {
        const int from = (rank_ - i + size_) % size_, to = (rank_ + i) % size_;
        b.recv(from, blocks + from * n * es, n * es);
        b.send(to, in + (to * count + off) * es, n * es);
      }
      kernels::cpu::copy(blocks + rank_ * n * es, in + (rank_ * count + off) * es, n * es);
      b.wait();
      for (int r = 0; r < size_; ++r) parts[r] = blocks + r * n * es;
      kernels::cpu::reduce_sum(parts.data(), size_, out + off * es, n, dtype);
    }
  });
}

void MpiTransport::all_reduce(const void* src, void* dst, uint64_t count, DType dtype) {
  check_reducible("all_reduce", rank_, dtype);
  const size_t es = elem_bytes(dtype), bytes = count * es;
  if (size_ == 1) return run_alone(CollDesc{CollOp::kAllReduce, dtype, count, -1}, dst, src, bytes);
  const auto R = static_cast<uint64_t>(size_);
  // One shot (every rank sends its whole input to every peer: one round) where the input
  // fits a descriptor message; else two shots with the reduce-scatter in the descriptor
  // messages (slices of count / R, each summed by its owner, then all-gathered: two rounds).
  // W = 2-4 over TCP: one shot was faster at 32 KiB (1.05-1.31x of MPI_Allreduce against
  // 0.83-0.93x), two shots at 64 KiB (0.87-0.97x against 0.43-0.69x).
  const bool one_shot = fits_inline(bytes);
  const bool two_shot = !one_shot && count >= R && fits_inline((count + R - 1) / R * es);
  InlineSend data;
  if (one_shot) {
    data = {static_cast<const uint8_t*>(src), bytes, 0};
  } else if (two_shot) {
    slices_.resize(2 * R);
    for (int q = 0; q < size_; ++q) {
      slice(count, size_, q, &slices_[2 * q], &slices_[2 * q + 1]);
      slices_[2 * q] *= es;
      slices_[2 * q + 1] *= es;
    }
    data = {static_cast<const uint8_t*>(src), 0, 0, slices_.data()};
  }
  run(CollDesc{CollOp::kAllReduce, dtype, count, -1}, data, [&](const char* op) {
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    if (one_shot)
      reduce_inline(in, out, count, dtype);
    else if (two_shot)
      all_reduce_two_shot_inline(in, out, dtype, op);
    else if (bytes <= kSmallAllReduceBytes || count < uint64_t(size_))
      all_reduce_small(in, out, count, dtype, op);
    else
      all_reduce_large(in, out, count, dtype, op);
  });
}

// out's block q = what peer q's descriptor message brought, this rank's own block = mine
// (copied first: in place, mine may lie in a peer's block of out).
void MpiTransport::gather_inline(const uint8_t* mine, uint8_t* out, size_t bytes) {
  kernels::cpu::copy(out + rank_ * bytes, mine, bytes);
  for (int i = 1; i < size_; ++i) {
    const int q = (rank_ + i) % size_;
    kernels::cpu::copy(out + q * bytes, inline_data(q), bytes);
  }
}

// The rank-order sum of this rank's `mine` and what each peer's descriptor message brought
// (reduce_scatter: the block for this rank; all_reduce: the whole input).
void MpiTransport::reduce_inline(const uint8_t* mine, void* dst, uint64_t count, DType dtype) {
  const size_t bytes = count * elem_bytes(dtype);
  if (bytes == 0) return;
  std::vector<const void*>& parts = parts_;
  parts.resize(static_cast<size_t>(size_));
  for (int q = 0; q < size_; ++q) parts[q] = q == rank_ ? mine : inline_data(q);
  // reduce_sum allows dst == mine, not a partial overlap.
  if (dst != mine && ranges_overlap(mine, bytes, dst, bytes)) {
    uint8_t* copy = scratch(bytes);
    kernels::cpu::copy(copy, mine, bytes);
    parts[rank_] = copy;
  }
  kernels::cpu::reduce_sum(parts.data(), size_, dst, count, dtype);
}

// After the descriptor messages brought every peer's slice rank_ of its input: sums that
// slice in rank order, then sends it to every peer and receives theirs (the all-gather).
// Each slice is summed once, by its owner, so every rank holds the same bits.
void MpiTransport::all_reduce_two_shot_inline(const uint8_t* src, uint8_t* dst, DType dtype,
                                              const char* op) {
  const size_t es = elem_bytes(dtype);
  const uint64_t my_off = slices_[2 * rank_], my_len = slices_[2 * rank_ + 1];
  // In place, the peers' slices of src went out with the descriptors: dst may be written.
  reduce_inline(src + my_off, dst + my_off, my_len / es, dtype);
  Batch b(comm_, kDataTag, rank_, op, waits_);
  for (int i = 1; i < size_; ++i) {
    const int from = (rank_ - i + size_) % size_, to = (rank_ + i) % size_;
    b.recv(from, dst + slices_[2 * from], slices_[2 * from + 1]);
    b.send(to, dst + my_off, my_len);
  }
  b.wait();
}

// Every rank gathers every rank's input and sums all of it in rank order: the same
// additions on every rank, so the same bits.
void MpiTransport::all_reduce_small(const uint8_t* src, uint8_t* dst, uint64_t count, DType dtype,
                                    const char* op) {
  const size_t bytes = count * elem_bytes(dtype);
  if (bytes == 0) return;
  uint8_t* all = scratch(size_ * bytes);
  Batch b(comm_, kDataTag, rank_, op, waits_);
  for (int i = 1; i < size_; ++i) {
    const int q = (rank_ + i) % size_;
    b.recv(q, all + q * bytes, bytes);
    b.send(q, src, bytes);
  }
  kernels::cpu::copy(all + rank_ * bytes, src, bytes);
  b.wait();  // src is read (sends done) before dst, which may be src, is written
  SmallVector<const void*, 16> parts(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) parts[r] = all + r * bytes;
  kernels::cpu::reduce_sum(parts.data(), size_, dst, count, dtype);
}

// Per piece: rank q receives slice q of every rank's input and sums it in rank order
// (reduce-scatter), then every rank sends its summed slice to every other (all-gather).
// Each slice is summed once, by its owner, so every rank holds the same bits. Pipelined:
// the reduce-scatter messages of every piece of a window are posted at once, and a piece's
// all-gather is posted as soon as it is summed, so the sum of piece j overlaps the transfer
// of piece j+1 (what Open MPI's TCP transport moves meanwhile, and the kernel's socket
// buffers take), where one piece for the whole input waited for all of it before summing
// and summed before sending anything back (16 MiB fp32, W = 2 over TCP: 0.93x of
// MPI_Allreduce, measured on the AMX Xeon).
void MpiTransport::all_reduce_large(const uint8_t* src, uint8_t* dst, uint64_t count, DType dtype,
                                    const char* op) {
  const size_t es = elem_bytes(dtype);
  const auto R = static_cast<uint64_t>(size_);
  // Each rank's slice of a piece about kPipeSliceBytes (less where R of them would exceed
  // kScratchBytes); a window's received blocks within kScratchBytes.
  const uint64_t piece =
      R * std::max<uint64_t>(1, std::min(kPipeSliceBytes, kScratchBytes / R) / es);
  const uint64_t window = std::max<uint64_t>(piece, kScratchBytes / es / piece * piece);
  SmallVector<const void*, 16> parts(static_cast<size_t>(size_));
  for (uint64_t w0 = 0; w0 < count; w0 += window) {
    const uint64_t wn = std::min(window, count - w0);
    const uint64_t pieces = (wn + piece - 1) / piece;
    uint8_t* scratch_all = scratch(static_cast<size_t>(R * ((wn + R - 1) / R + pieces) * es));
    // Piece j: elements [w0 + j * piece, + n_j); this rank's slice of it (my_off, my_len);
    // its blocks from every rank at blocks_j (R x my_len).
    struct Piece {
      uint64_t off, n, my_off, my_len;
      uint8_t* blocks;
    };
    // One tag for both phases: each rank posts every reduce-scatter message of the window
    // before any all-gather message, so MPI's in-order matching pairs them.
    CF_ASSERT(pieces <= kMaxPipePieces);
    SmallVector<Piece, kMaxPipePieces> ps;
    // The batches are ended (waited for, or cancelled when this throws) all-gather first.
    struct EndBatches {
      std::array<std::optional<Batch>, kMaxPipePieces>&rs, &ag;
      ~EndBatches() {
        for (auto& b : ag) b.reset();
        for (auto& b : rs) b.reset();
      }
    } end_batches{pipe_rs_, pipe_ag_};
    uint8_t* at = scratch_all;
    for (uint64_t j = 0; j < pieces; ++j) {
      Piece pc{};
      pc.off = w0 + j * piece;
      pc.n = std::min(piece, w0 + wn - pc.off);
      slice(pc.n, size_, rank_, &pc.my_off, &pc.my_len);
      pc.blocks = at;
      at += R * pc.my_len * es;
      Batch& b = pipe_rs_[j].emplace(comm_, kDataTag, rank_, op, waits_);
      for (int i = 1; i < size_; ++i) {
        const int from = (rank_ - i + size_) % size_, to = (rank_ + i) % size_;
        uint64_t to_off = 0, to_len = 0;
        slice(pc.n, size_, to, &to_off, &to_len);
        b.recv(from, pc.blocks + from * pc.my_len * es, pc.my_len * es);
        b.send(to, src + (pc.off + to_off) * es, to_len * es);
      }
      ps.push_back(pc);
    }
    for (uint64_t j = 0; j < pieces; ++j) {
      const Piece& pc = ps[j];
      // Also every reduce-scatter send of this piece done: the all-gather posted below
      // receives into those regions of dst, which may be src.
      pipe_rs_[j]->wait();
      for (int r = 0; r < size_; ++r) parts[r] = pc.blocks + r * pc.my_len * es;
      parts[rank_] = src + (pc.off + pc.my_off) * es;  // reduce_sum allows dst == mine
      uint8_t* mine = dst + (pc.off + pc.my_off) * es;
      kernels::cpu::reduce_sum(parts.data(), size_, mine, pc.my_len, dtype);
      Batch& b = pipe_ag_[j].emplace(comm_, kDataTag, rank_, op, waits_);
      for (int i = 1; i < size_; ++i) {
        const int from = (rank_ - i + size_) % size_, to = (rank_ + i) % size_;
        uint64_t from_off = 0, from_len = 0;
        slice(pc.n, size_, from, &from_off, &from_len);
        b.recv(from, dst + (pc.off + from_off) * es, from_len * es);
        b.send(to, mine, pc.my_len * es);
      }
    }
    for (uint64_t j = 0; j < pieces; ++j) pipe_ag_[j]->wait();
  }
}

}  // namespace commfuse::comm::mpi
#endif  // COMMFUSE_HAVE_MPI
