// The interface every transport implements (shm on one host, MPI across hosts). A
// communicator owns one transport; collectives and, later, fused ops call it.
//
// Contract for every call:
// - It is collective: every rank of the communicator calls it with matching arguments.
//   The transport checks that they match (a small descriptor travels with the data) and
//   fails with RUNTIME_ERROR naming the mismatch instead of hanging or corrupting data.
// - Every wait has a deadline (COMMFUSE_TIMEOUT_S); on expiry RUNTIME_ERROR names the op,
//   this rank and the ranks that did not arrive. A dead peer is reported as soon as it is
//   noticed.
// - A call that fails at its first synchronization on every rank alike — a rank rejected
//   its arguments (reject), or the ranks' descriptors disagree — moved no data: it fails
//   with comm::CallFailed (RUNTIME_ERROR naming the rank and the argument, comm/call_check.hpp)
//   and the transport stays usable, unless the ranks' calls were also out of step (then it
//   is fatal; call_check.cpp's fail_call checks that first). After any other failure (a
//   dead or stalled peer, a timeout, calls out of step, a callback that threw mid-stream)
//   the transport is aborted: later calls fail fast with RUNTIME_ERROR.
// - Reductions sum in fp32 (integers: exactly, in int64) in rank order 0..R-1, so every
//   rank gets bitwise-identical results (SPEC §0).
#pragma once

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "comm/failure.hpp"
#include "core/byte_ranges.hpp"

namespace commfuse::comm {

enum class CollOp : uint32_t {
  kBarrier = 1,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kAllToAll,
  kGatherStream,
  kAllToAllStream,
};
const char* coll_op_name(CollOp op);

// The descriptor op of a rank that rejected its call (Transport::reject).
inline constexpr uint32_t kRejectedOp = 0x52454A43;  // "REJC"

// How a transport moves a collective's data where it has more than one way; every rank
// must use the same (it is part of the descriptor). shm: through the slots, or read from
// the peers' buffers with CMA (comm/shm/cma.hpp).
// all_reduce: one-shot (every rank sums everything) or two-shot (reduce-scatter +
// all-gather), docs/algorithms.md.
enum class CollAlgo : uint32_t { kDefault = 0, kCma = 1, kOneShot = 2, kTwoShot = 3 };
const char* coll_algo_name(CollAlgo a);  // "slots", "cma", "one_shot", "two_shot"

// What a rank says it is doing; compared across ranks before data is combined.
struct CollDesc {
  CollOp op = CollOp::kBarrier;
  DType dtype = DType::kInt8;
  uint64_t count = 0;  // elements: per rank (all_gather, reduce_scatter output), per peer
                       // (all_to_all), total (all_reduce, broadcast)
  int32_t root = -1;   // broadcast only
  uint64_t piece = 0;  // streams only: the piece size, which must match too
  CollAlgo algo = CollAlgo::kDefault;

  bool operator==(const CollDesc&) const = default;
};
// "all_reduce count 1024 bfloat16"
std::string describe(const CollDesc& d);

// Streaming collectives for the fused operators (docs/algorithms.md "Streams"), run by
// exec::gather_stream / exec::all_to_all_stream (src/exec/stream.hpp). Instead of
// buffers the op passes callbacks, so a transport that can (shm) lets the op write its
// contribution straight into the shared region and compute on the peers' contributions in
// place, with no staging copies; other transports stage through buffers and their plain
// collectives. Data moves in pieces, at the same offsets on every rank: each piece is a
// multiple of `unit` bytes and at most `max_piece` bytes (0: the transport's choice), and a
// piece is never split below `unit`. Callbacks never see an empty piece (an empty stream
// still synchronizes the ranks). Pointers handed to a callback are valid only during
// that call. A callback may throw: the transport then aborts the group like any failure.
using StreamPeerFn = std::function<void(int src, const uint8_t* data, uint64_t off, uint64_t n)>;
using StreamAllFn = std::function<void(const uint8_t* const* parts, uint64_t off, uint64_t n)>;

// The piece size a stream uses: a multiple of unit, at most max_piece (when set) and limit,
// but never below one unit.
uint64_t stream_piece_bytes(uint64_t bytes, uint64_t unit, uint64_t max_piece, uint64_t limit);

// Every rank contributes `bytes` (equal on every rank) and sees every rank's contribution.
struct GatherStream {
  uint64_t bytes = 0;
  uint64_t unit = 1;  // bytes must be a multiple of unit
  uint64_t max_piece = 0;
  // Writes this rank's bytes [off, off + n) to dst. Required.
  std::function<void(uint8_t* dst, uint64_t off, uint64_t n)> pack;
  // Optional: called once per rank for each piece, this rank first, then rank+1, rank+2, ...
  // (mod R), each as soon as that rank's piece is readable.
  StreamPeerFn on_piece;
  // Optional: after the on_piece calls of a piece, every rank's piece in rank order 0..R-1.
  StreamAllFn on_all;
  // Optional: this rank's `bytes`, contiguous and unchanged during the call, so that the
  // transport may send them (MPI) or let peers read them (shm with CMA) in place instead of
  // packing a copy; and where this rank wants rank src's bytes [off, off + n) (gather_out):
  // the transport may receive them straight there and hand that pointer to on_piece.
  // source is set alike on every rank (shm chooses CMA by it). shm uses them only without
  // on_all (which needs every rank's piece at once).
  const uint8_t* source = nullptr;
  std::function<uint8_t*(int src, uint64_t off)> land;
};

// Every rank sends `bytes` (equal on every rank) to every rank and sees what each rank sent
// it: the streaming all_to_all.
struct AllToAllStream {
  uint64_t bytes = 0;  // per destination
  uint64_t unit = 1;
  uint64_t max_piece = 0;
  // Writes this rank's bytes [off, off + n) for destination rank `to` to dst. Required.
  std::function<void(int to, uint8_t* dst, uint64_t off, uint64_t n)> pack;
  StreamPeerFn on_piece;  // as in GatherStream: what rank src sent this rank
  StreamAllFn on_all;
  // Optional: this rank's bytes for destination `to` are source + to * bytes, contiguous and
  // unchanged during the call, so that the peers may read them in place (shm with CMA) or
  // they are sent from there (MPI) instead of this rank packing a copy. Set alike on every
  // rank (shm chooses CMA by it).
  const uint8_t* source = nullptr;
  // Optional (a local choice): this rank's bytes for destination `to` [off, off + n),
  // readable in place and unchanged from the call until the stream ends (the op may compute
  // them in the call), so that no copy of them need be packed: shm reads this rank's part
  // for itself there instead of carrying it through its slots (1/R of what it packs; the
  // peers' parts are still packed into them); MPI sends every peer's part from there and
  // reads its own there. With source set, unused.
  std::function<const uint8_t*(int to, uint64_t off, uint64_t n)> view;
};

// A stream's pieces as a transport moves them: the primitive the stream executor
// (src/exec/stream.hpp) drives. Pieces are numbered 0..pieces()-1 at the same offsets on
// every rank. For each piece i the executor calls publish(i) (this rank's piece is packed
// and made readable or sent), then wait(q, i) for every rank q in turn (own first), computes
// on what it returns, and release(i) once done with every rank's piece i; it publishes
// lookahead() pieces ahead of the one it computes on (MPI: 1, so piece i+1 is on the wire
// while piece i is computed on). A transport calls drive(channel) once per stream, inside its
// own failure handling: anything the executor or a callback throws aborts the group as any
// failure does.
class PieceChannel {
 public:
  virtual ~PieceChannel() = default;
  virtual const char* op() const = 0;  // the trace category, "gather_stream"
  // The stream's bytes cut at multiples of the piece size: pieces() of them, the last one
  // shorter; at least one (empty) where the transport synchronizes even an empty stream.
  size_t pieces() const {
    const auto n = static_cast<size_t>((bytes_ + piece_ - 1) / piece_);
    return at_least_one_ && n == 0 ? 1 : n;
  }
  uint64_t piece_offset(size_t i) const { return i * piece_; }
  uint64_t piece_bytes(size_t i) const {
    return std::min(piece_, bytes_ - std::min<uint64_t>(bytes_, i * piece_));
  }
  virtual size_t lookahead() const { return 0; }
  virtual void publish(size_t i) = 0;
  // Rank q's piece i (this rank's own for q == rank: what it packed or its source), readable
  // until release(i). Waits, bounded by the deadline, for a peer's.
  virtual const uint8_t* wait(int q, size_t i) = 0;
  // The trace span a wait for a peer's piece records: "wait" for a flag or a receive, "read"
  // where waiting is this rank's own copy from the peer's memory (CMA).
  virtual const char* wait_span() const { return "wait"; }
  virtual void release(size_t) {}
  // Between blocks of computation: lets the transfers move where nothing else does.
  virtual void progress() {}

 protected:
  PieceChannel(uint64_t bytes, uint64_t piece, bool at_least_one)
      : bytes_(bytes), piece_(piece), at_least_one_(at_least_one) {}
  uint64_t piece_size() const { return piece_; }

 private:
  uint64_t bytes_, piece_;
  bool at_least_one_;
};
using PieceDriver = std::function<void(PieceChannel&)>;

// Checks every transport makes at the start of a collective: RUNTIME_ERROR if an earlier
// failure left the transport unusable, and PARAM_INVALID if a sum was asked of a dtype that
// cannot be summed.
void check_usable(const char* op, int rank, const Failure& failure);
// Whether two byte ranges share a byte (core/byte_ranges.hpp): an in-place call.
using detail::ranges_overlap;
// The source an in-place call reads while it writes dst: where the two overlap, *src becomes
// a private copy held in `staged`; elsewhere it stays (null for an empty call). False where the
// copy cannot be allocated (the caller refuses the call, before it starts).
bool copy_if_overlapping(const void** src, size_t src_bytes, const void* dst, size_t dst_bytes,
                         std::unique_ptr<uint8_t[]>& staged);
void check_reducible(const char* op, int rank, DType dtype);
// RUNTIME_ERROR: another thread is in a call on this communicator (its calls come from one
// thread at a time; docs/reliability.md, Threads).
[[noreturn]] void throw_busy(const char* op, int rank);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;  // "shm", "mpi"
  // Whether bytes move while this rank computes (MPI: between the GEMM's blocks, or all the
  // while with a progress thread). Schedules then split their GEMMs so that a transfer hides
  // behind the next block; where the computing core is the one that copies (shm), splitting
  // only adds GEMM calls.
  virtual bool overlaps_compute() const { return false; }
  // The largest block a collective moves together with its descriptors, in one round of
  // messages (MPI: kInlineMessageBytes less the header, less beyond 64 ranks; it depends on
  // the world size only, so every rank sees the same); a stream takes two rounds
  // (descriptors, then pieces), so up to this size it cannot hide what it adds. 0: no such
  // path (shm).
  virtual uint64_t one_round_bytes() const { return 0; }
  // This group's ranks per core of the host they run on (rounded up), as every rank of the
  // group sees it alike, so that a plan may depend on it (ranks choosing differently would
  // run different collectives); 0 where ranks could disagree (several hosts).
  virtual int ranks_per_core() const { return 0; }
  // Whether R calls of m rows of 16-bit dtype t on the direct small-m kernel are expected
  // faster than one call of the m·R rows (kernels/cpu/half_gemm_model.hpp:
  // direct_calls_pay), by the few-rows model rank 0 measured at set-up, which every rank
  // reads alike, so that a plan may depend on it; false where not measured (ranks sharing
  // cores, several hosts, MPI).
  virtual bool direct_calls_pay(DType, int64_t) const { return false; }
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void barrier() = 0;
  // buf holds count elements of dtype; on return every rank has root's data.
  virtual void broadcast(void* buf, uint64_t count, DType dtype, int root) = 0;
  // With one rank (R = 1) the four below are this rank's own data in dst (a gather or an
  // exchange with no peer moves only its block; a sum over one rank is its one term, bit for
  // bit): each transport copies src to dst once (kernels::cpu::copy: nothing in place,
  // overlapping ranges as by memmove), not through its steps, which copied twice and ran the
  // sum kernel over one input.
  // src: count elements; dst: R * count, rank s's block at [s * count, (s + 1) * count).
  virtual void all_gather(const void* src, void* dst, uint64_t count, DType dtype) = 0;
  // src: R * count elements, block s goes to rank s; dst: count elements = the rank-order sum
  // of every rank's block r.
  virtual void reduce_scatter(const void* src, void* dst, uint64_t count, DType dtype) = 0;
  // src and dst: count elements; dst = rank-order sum over ranks. src may equal dst.
  virtual void all_reduce(const void* src, void* dst, uint64_t count, DType dtype) = 0;
  // src: R * count, block s goes to rank s; dst: R * count, block s came from rank s.
  virtual void all_to_all(const void* src, void* dst, uint64_t count, DType dtype) = 0;

  // The streams' transport side: set up the call (descriptor check, buffers, transfers) and
  // run drive over its pieces (exec::gather_stream / exec::all_to_all_stream drive them and
  // call the stream's on_piece / on_all). The default implementations stage each piece
  // through the plain collectives.
  virtual void open_gather_stream(const GatherStream& s, const PieceDriver& drive);
  virtual void open_all_to_all_stream(const AllToAllStream& s, const PieceDriver& drive);

  // Marks this rank failed so that peers waiting for it fail promptly with this reason
  // instead of waiting for the deadline; the transport is unusable from then on. Any thread
  // may call it, also while a call is in flight in another: that call's waits then end
  // with this reason (shm: within ~20 ms; MPI: within a poll's clock reading).
  virtual void abort(const std::string& reason) = 0;
  // This rank makes no more calls (its communicator is being destroyed, no call in flight):
  // where the peers can be told without a call of theirs (shm), a peer's wait for this rank
  // in a later call fails at once naming `reason`; peers still finishing the calls this rank
  // finished are not disturbed. Never throws.
  virtual void closing(const std::string& /*reason*/) {}
  // This rank rejected the call it is making (its arguments, before anything was sent):
  // takes the place of the call's first synchronization with a "rejected" descriptor
  // carrying reason, so that the peers that entered the call fail it naming this rank, and
  // returns; the transport stays usable (MPI: unless the peers' descriptors show the calls
  // out of step). Never throws (a failure to tell the peers aborts).
  virtual void reject(const std::string& reason) = 0;
  // Why the transport is unusable; empty while it is usable. Any thread.
  std::string failure() const { return failure_.reason(); }
  bool usable() const { return !failure_.failed(); }

 protected:
  Failure failure_;  // set once a call failed or abort() came: the transport is then unusable

 private:
  template <typename Body>
  void staged(const char* op, Body&& body);
};

}  // namespace commfuse::comm
