// Collectives over MPI point-to-point messages, for ranks on different hosts (or on one
// host when COMMFUSE_TRANSPORT=mpi). Every collective starts by exchanging a small
// descriptor with every peer, so a mismatch or a peer that rejected its arguments is
// reported on every rank before any data is used (small data travels in the descriptor
// message, read only once every descriptor matched: InlineSend; all_gather's and
// all_to_all's larger blocks go right after it, received once the descriptors matched:
// EarlySend). Data moves with nonblocking sends and receives, polled with a deadline (MPI's
// blocking calls cannot time out); point-to-point rather than MPI's collectives because an
// unfinished receive names the missing peer, can be cancelled, and needs no int-sized counts or
// datatypes for large strided blocks. Sums use kernels::cpu::reduce_sum in rank order, so results
// are bitwise identical on every rank and to the shm transport (MPI_Allreduce cannot sum bf16 and
// fixes no order). docs/algorithms.md describes each collective's messages. Only built with MPI.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/call_check.hpp"
#include "comm/mpi/mpi_requests.hpp"
#include "comm/transport.hpp"

namespace commfuse::comm::mpi {

// What a rank sends before every collective. op 0 means "this rank failed" with a reason.

struct WireDesc {
  uint32_t op;
  int32_t dtype;
  uint64_t count;
  int32_t root;
  uint32_t op_seq;
  uint64_t unit;      // streams: the piece size (CollDesc::piece)
  uint32_t algo;      // CollDesc::algo
  uint32_t early;     // bytes sent to each peer right after this descriptor (EarlySend), or 0
  WireSignature sig;  // the user's call (comm/call_check.hpp)
  char reason[464];   // op 0 (failed) or kRejectedOp: why
};

// A collective's data small enough to travel in its descriptor message: one round of
// messages instead of two (descriptors, then data), which halves the latency of small
// calls. To peer q go `bytes` bytes at base + q * stride (stride 0: the same bytes to every
// peer), or, with `slices`, slices[2q + 1] bytes at base + slices[2q]; base null: nothing.
// Every rank decides alike from the descriptor, so a receiver whose descriptors matched
// knows what each peer's message carries.
struct InlineSend {
  const uint8_t* base = nullptr;
  size_t bytes = 0;
  size_t stride = 0;
  const uint64_t* slices = nullptr;
};
// The largest descriptor message with data: an eager one, so it goes without a rendezvous
// round trip (one more byte and all_reduce's one-shot at 64 KiB ran 0.43-0.69x of
// MPI_Allreduce, W = 2-4 over TCP).
// Every rank keeps a receive buffer of this size per peer, so with many ranks it shrinks
// to keep them within kInboxBytes (R = 64: 64 KiB each).
inline constexpr size_t kInlineMessageBytes = kEagerMessageBytes;
// A collective's blocks too large for the descriptor message, sent as their own messages
// right after it instead of after every descriptor was checked, so that they are on the
// way a round trip sooner. To peer q go `bytes` bytes at base + q * stride; base null:
// nothing. The descriptor says how many (WireDesc::early): where the check fails the call
// (CallFailed), every rank takes the announced blocks off the wire (drain_early) and the
// communicator's next messages match as usual.
struct EarlySend {
  const uint8_t* base = nullptr;
  size_t bytes = 0;
  size_t stride = 0;
};
// The most bytes per peer an EarlySend carries (WireDesc::early's range).
inline constexpr size_t kMaxEarlyBytes = UINT32_MAX;
inline constexpr size_t kInboxBytes = size_t{4} << 20;

class MpiTransport final : public Transport {
 public:
  // Takes ownership of comm (a duplicate of the user's, so our messages never match theirs).
  // progress_thread: WaitRules::progress_thread (use_progress_thread).
  MpiTransport(MPI_Comm comm, bool oversubscribed, bool progress_thread);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }
  bool overlaps_compute() const override { return true; }
  uint64_t one_round_bytes() const override { return inline_bytes_; }
  void barrier() override;
  void broadcast(void* buf, uint64_t count, DType dtype, int root) override;
  void all_gather(const void* src, void* dst, uint64_t count, DType dtype) override;
  void reduce_scatter(const void* src, void* dst, uint64_t count, DType dtype) override;
  void all_reduce(const void* src, void* dst, uint64_t count, DType dtype) override;
  void all_to_all(const void* src, void* dst, uint64_t count, DType dtype) override;
  void open_gather_stream(const GatherStream& s, const PieceDriver& drive) override;
  void open_all_to_all_stream(const AllToAllStream& s, const PieceDriver& drive) override;
  void abort(const std::string& reason) override;
  void reject(const std::string& reason) override;

 private:
  // RuntimeFailure naming op, the transport unusable for good, once the program itself
  // called MPI_Finalize: any MPI call then ended the whole job through MPI's error handler.
  void refuse_after_finalize(const char* op);
  // run() for bodies defined in other files (the streams, mpi_stream.cpp).
  void run_fn(const CollDesc& desc, const std::function<void(const char*)>& body);
  template <typename Body>
  void run(const CollDesc& desc, Body&& body);
  template <typename Body>
  void run(const CollDesc& desc, const InlineSend& data, Body&& body);
  // The body's receives must take early's blocks; run waits for their sends after it.
  template <typename Body>
  void run(const CollDesc& desc, const InlineSend& data, const EarlySend& early, Body&& body);
  // Sends mine (and data, when given) to every peer and receives theirs into descs_ (their
  // data into the inbox, inline_data), waiting by rules. early's blocks are posted on
  // `sent` after the descriptors and not waited for here.
  void exchange_descriptors(const WireDesc& mine, const char* op, const WaitRules& rules,
                            const InlineSend& data = {}, const EarlySend& early = {},
                            Batch* sent = nullptr);
  // One rank (W = 1): the call with no peers, src copied to dst (Transport: the whole result),
  // without the outbox, staging or early blocks of the general path.
  void run_alone(const CollDesc& desc, void* dst, const void* src, size_t bytes);
  // The blocks of a call too large for its descriptor message, bytes to each peer q at
  // src + q * stride, to send early; none (the body sends them) alone or past WireDesc::early.
  EarlySend early_blocks(const void* src, size_t bytes, size_t stride) const;
  // After a call failed at the descriptor check (or this rank rejected it): receives, and
  // drops, the blocks each peer's descriptor says it sent early.
  void drain_early(const char* op);
  // What peer q's descriptor message carried after the header (valid until the next call).
  const uint8_t* inline_data(int q) const;
  // Whether a block of this many bytes travels in the descriptor message.
  bool fits_inline(size_t bytes) const { return bytes <= inline_bytes_; }
  void check_descriptors(const CollDesc& desc, const char* op);
  void gather_inline(const uint8_t* mine, uint8_t* out, size_t bytes);
  void reduce_inline(const uint8_t* mine, void* dst, uint64_t count, DType dtype);
  // The slices are slices_ (all_reduce sets them before the descriptor exchange).
  void all_reduce_two_shot_inline(const uint8_t* src, uint8_t* dst, DType dtype, const char* op);
  void all_reduce_small(const uint8_t* src, uint8_t* dst, uint64_t count, DType dtype,
                        const char* op);
  void all_reduce_large(const uint8_t* src, uint8_t* dst, uint64_t count, DType dtype,
                        const char* op);
  uint8_t* scratch(size_t bytes);
  // A private copy of src where it overlaps dst other than as this rank's own block `own`
  // (null: anywhere): an in-place call sends from it, since blocks arrive in dst while src
  // is still being sent. Made before the call's descriptors go out, so that a failed
  // allocation is this rank's rejection of the call (the peers fail it naming this rank; the
  // communicator stays usable). Returns src itself where there is no overlap.
  const void* staged_source(const char* op, const void* src, size_t src_bytes, const void* dst,
                            size_t dst_bytes, const void* own, std::unique_ptr<uint8_t[]>& staged);
  // The streams' staging: grows, never shrinks, never zeroed (a fresh 32 MiB buffer per
  // call measured ~20 ms of page faults and memset at a prefill shape).
  uint8_t* stream_buffer(size_t bytes);

  // Who may make MPI calls: MPI is initialized MPI_THREAD_SERIALIZED, so an abort from a
  // thread other than the one making this communicator's calls only changes state_, and
  // the calling thread tells the peers (tell_peers_failed) when it can. state_ changes only
  // by compare-and-swap, so an abort lands either inside a call (kAbortedInCall: the call
  // fails) or between calls, never both ways.
  enum : int {
    kIdle,
    kInCall,
    kAbortedInCall,  // an abort came during the call: leave_call fails it and tells
    kUntold,         // closed by an abort between calls that could not send
    kClosed,
  };
  // Begins a call on the calling thread: false once the transport failed or closed (an
  // abort from another thread not yet told is told now) or while another thread is in one.
  bool enter_call();
  // Ends a call whose messages all completed: false if an abort came during it (the peers
  // are then told and the transport is closed).
  bool leave_call();
  // The "failed" descriptor of the next call, carrying failure_'s reason; waits timeout_s
  // at most, and is not ended by the failure it reports.
  void tell_peers_failed(int timeout_s);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  WaitRules waits_;  // its stop is failure_: an abort from another thread ends the waits
  std::atomic<int> state_{kIdle};
  std::atomic<std::thread::id> caller_;  // the thread that made the last call (or created it)
  uint32_t op_seq_ = 0;
  std::vector<WireDesc> descs_;
  // Per peer, one descriptor message: header + reason or inline data (kInboxStride each);
  // the outbox holds the messages this rank sends with data.
  std::vector<uint8_t> inbox_, outbox_;
  size_t inline_bytes_ = 0;         // data per message (the same on every rank)
  size_t inbox_stride_ = 0;         // one message: header + max(reason, inline_bytes_)
  std::vector<uint8_t> scratch_;    // received blocks before they are summed
  std::vector<const void*> parts_;  // reduce_inline's summands
  std::vector<uint64_t> slices_;    // all_reduce's two-shot: rank q's slice, bytes
                                    // {offset, length} at [2q], [2q + 1]
  std::unique_ptr<uint8_t[]> stream_buf_;
  size_t stream_cap_ = 0;
  // all_reduce_large's batches: a reduce-scatter and an all-gather one per piece of a window
  // (16 pieces at most, at W = 2), constructed in place (a Batch does not move) in storage
  // kept across calls, so that a call allocates nothing; emptied after each window, also when
  // it throws.
  static constexpr size_t kMaxPipePieces = 32;
  std::array<std::optional<Batch>, kMaxPipePieces> pipe_rs_, pipe_ag_;
};

}  // namespace commfuse::comm::mpi
