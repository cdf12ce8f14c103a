// The streams' channels on shared memory (the executor's loop is exec/stream.cpp). Slots:
// publish packs this rank's piece straight into its slot and raises the step's flag, wait
// returns a pointer into the peer's slot, so a piece is copied at most once (by pack) and
// fused ops compute on peer data without staging it. CMA: a gather_stream whose op gives
// its source and a landing place (gather_out) may instead read the peers' sources straight
// there: one copy, where the slots' pack plus the op's copy to gather_out make two. Steps
// follow the collectives' protocol (shm_transport.hpp); a unit too large for a slot falls
// back to the staged default.
#include <algorithm>
#include <functional>
#include <vector>

#include "comm/fault.hpp"
#include "comm/shm/shm_transport.hpp"
#include "core/trace.hpp"

namespace commfuse::comm::shm {

// Piece i is step s of the call; lookahead 0, so one step is open at a time: a rank is done
// with every slot of piece i before it publishes piece i+1, whose 3(s+1)+1 tells the peers
// so (shm_transport.hpp: the collectives' steps publish no 3s+3 either).
class ShmTransport::SlotChannel final : public PieceChannel {
 public:
  // Writes this rank's piece [off, off + n) into its slot of the step.
  using Pack = std::function<void(uint8_t* slot, uint64_t off, uint64_t n)>;
  // Where this rank's part for itself is, when not in its slot (all_to_all's own).
  using Own = std::function<const uint8_t*(uint64_t off, uint64_t n)>;
  // Rank q's part of a step sits at slot(q, s) + part_stride * this rank (all_to_all: each
  // slot holds one piece per destination; gather: 0).
  SlotChannel(ShmTransport& t, const CollDesc& desc, uint64_t part_stride, Pack pack, Own own = {})
      : PieceChannel(desc.count, desc.piece, /*at_least_one=*/true),  // an empty call syncs
        t_(t),
        desc_(desc),
        op_(coll_op_name(desc.op)),
        stride_(part_stride),
        pack_(std::move(pack)),
        own_(std::move(own)) {}
  const char* op() const override { return op_; }
  void publish(size_t i) override {
    fault_point(t_.rank_, op_, i);
    s_ = t_.begin_step(op_);
    if (const uint64_t n = piece_bytes(i); n != 0) pack_(t_.slot(t_.rank_, s_), piece_offset(i), n);
    t_.arrive(s_, i == 0, desc_, op_);
  }
  const uint8_t* wait(int q, size_t i) override {
    if (q != t_.rank_)
      t_.peers_.wait(q, 3 * s_ + 1, op_);
    else if (own_ && piece_bytes(i) != 0)
      return own_(piece_offset(i), piece_bytes(i));
    return t_.slot(q, s_) + stride_ * static_cast<uint64_t>(t_.rank_);
  }

 private:
  ShmTransport& t_;
  const CollDesc desc_;
  const char* op_;
  const uint64_t stride_;
  Pack pack_;
  Own own_;
  uint32_t s_ = 0;
};

// Inside cma_call (which published the source and checked the descriptors): the peers'
// pieces are read from their sources when waited for, into the op's landing place or
// scratch_ (valid until the next wait: CMA is not chosen for streams with on_all).
class ShmTransport::CmaGatherChannel final : public PieceChannel {
 public:
  CmaGatherChannel(ShmTransport& t, const GatherStream& gs, const CollDesc& desc, const char* op)
      : PieceChannel(gs.bytes, desc.piece, false), t_(t), gs_(gs), op_(op) {}
  const char* op() const override { return op_; }
  // 0 and 1 are cma_call's fault points, before and after publishing.
  void publish(size_t i) override { fault_point(t_.rank_, op_, i + 2); }
  const uint8_t* wait(int q, size_t i) override {
    const uint64_t off = piece_offset(i);
    if (q == t_.rank_) return gs_.source + off;
    uint8_t* dst = gs_.land ? gs_.land(q, off) : t_.scratch_.data();
    t_.read_peer(q, off, dst, piece_bytes(i), op_);
    return dst;
  }
  const char* wait_span() const override { return "read"; }

 private:
  ShmTransport& t_;
  const GatherStream& gs_;
  const char* op_;
};

// all_to_all_stream with CMA, inside cma_call (which published the source): peer q's piece
// for this rank is read from q's source at this rank's block when waited for, into
// scratch_ at q's part (every part stays valid until the piece is released: on_all sees
// them all).
class ShmTransport::CmaAllToAllChannel final : public PieceChannel {
 public:
  CmaAllToAllChannel(ShmTransport& t, const AllToAllStream& as, const CollDesc& desc,
                     const char* op)
      : PieceChannel(as.bytes, desc.piece, false), t_(t), as_(as), op_(op) {}
  const char* op() const override { return op_; }
  void publish(size_t i) override { fault_point(t_.rank_, op_, i + 2); }
  const uint8_t* wait(int q, size_t i) override {
    const uint64_t at = static_cast<uint64_t>(t_.rank_) * as_.bytes + piece_offset(i);
    if (q == t_.rank_) return as_.source + at;
    uint8_t* dst = t_.scratch_.data() + static_cast<size_t>(q) * piece_size();
    t_.read_peer(q, at, dst, piece_bytes(i), op_);
    return dst;
  }
  const char* wait_span() const override { return "read"; }

 private:
  ShmTransport& t_;
  const AllToAllStream& as_;
  const char* op_;
};

void ShmTransport::open_gather_stream(const GatherStream& gs, const PieceDriver& drive) {
  // With CMA a piece is only what the op asked for (max_piece, its comm_turn), else each
  // rank's whole block: on shm the core that reads a piece is the one that computes on it,
  // so smaller pieces overlap nothing and only cut the op's GEMM into smaller, slower calls
  // (fp32 4096x4096x64 at W = 2: 256-row pieces 0.90x of the unfused composition, whole
  // blocks 1.06x).
  if (gs.source != nullptr && !gs.on_all &&
      choose_copy(CollOp::kGatherStream, gs.bytes) == CollAlgo::kCma) {
    const uint64_t piece =
        stream_piece_bytes(gs.bytes, gs.unit, gs.max_piece, std::max(gs.bytes, gs.unit));
    CollDesc desc{CollOp::kGatherStream, DType::kInt8, gs.bytes, -1, piece};
    desc.algo = CollAlgo::kCma;
    run(desc, [&](const char* op) {
      if (!gs.land && gs.bytes > 0) grow_scratch(op, piece);
      CmaGatherChannel ch(*this, gs, desc, op);
      cma_call(desc, op, gs.source, true, [&] { drive(ch); });
    });
    return;
  }
  const uint64_t piece = stream_piece_bytes(gs.bytes, gs.unit, gs.max_piece, slot_bytes_);
  if (piece > slot_bytes_) {
    Transport::open_gather_stream(gs, drive);
    return;
  }
  // The piece size is checked across ranks: different pieces would read wrong offsets.
  const CollDesc desc{CollOp::kGatherStream, DType::kInt8, gs.bytes, -1, piece};
  run(desc, [&](const char* op) {
    auto pack = [&](uint8_t* slot, uint64_t off, uint64_t n) {
      trace::Span span("pack", op, rank_, n);
      gs.pack(slot, off, n);
    };
    SlotChannel ch(*this, desc, 0, std::ref(pack));
    drive(ch);
  });
}

void ShmTransport::open_all_to_all_stream(const AllToAllStream& as, const PieceDriver& drive) {
  // With CMA each peer's block for this rank is read from its source: one copy, where the
  // slots take the pack and then the peer's read of lines this rank has just written (the
  // slower of the two: alltoall_matmul 4096x2048x4096 bf16 at W = 2 spent 5.5 ms moving
  // rows through the slots against 4 ms for the CMA all_to_all and a permute). Pieces of
  // at most 4 MiB (or the op's max_piece), kept per peer for on_all.
  if (as.source != nullptr && as.bytes > 0 &&
      choose_copy(CollOp::kAllToAllStream, as.bytes) == CollAlgo::kCma) {
    const uint64_t piece = stream_piece_bytes(as.bytes, as.unit, as.max_piece,
                                              std::max<uint64_t>(as.unit, uint64_t{4} << 20));
    CollDesc desc{CollOp::kAllToAllStream, DType::kInt8, as.bytes, -1, piece};
    desc.algo = CollAlgo::kCma;
    run(desc, [&](const char* op) {
      grow_scratch(op, static_cast<size_t>(size_) * piece);
      CmaAllToAllChannel ch(*this, as, desc, op);
      cma_call(desc, op, as.source, true, [&] { drive(ch); });
    });
    return;
  }
  // Each step's slot holds one piece per destination, at q * piece.
  const uint64_t piece =
      stream_piece_bytes(as.bytes, as.unit, as.max_piece, slot_bytes_ / static_cast<size_t>(size_));
  if (piece * static_cast<uint64_t>(size_) > slot_bytes_) {
    Transport::open_all_to_all_stream(as, drive);
    return;
  }
  const CollDesc desc{CollOp::kAllToAllStream, DType::kInt8, as.bytes, -1, piece};
  // This rank's part for itself read in place where the op has it (not packed into the slot
  // only to be read back: matmul_reduce_scatter W = 2 prefill packed 16 MiB of its 32).
  // (The callables by reference, std::ref: a std::function copying a lambda of several
  // references, or another std::function, allocates, a cost a tiny op measures.)
  auto own_in_source = [&](uint64_t off, uint64_t) {
    return as.source + static_cast<uint64_t>(rank_) * as.bytes + off;
  };
  auto own_in_view = [&](uint64_t off, uint64_t n) { return as.view(rank_, off, n); };
  SlotChannel::Own own;
  if (as.source != nullptr)
    own = std::ref(own_in_source);
  else if (as.view)
    own = std::ref(own_in_view);
  const int packed = own ? size_ - 1 : size_;
  run(desc, [&](const char* op) {
    auto pack = [&](uint8_t* slot, uint64_t off, uint64_t n) {
      // Peers first (they wait for it), then this rank's own piece unless own reads it.
      for (int i = 1; i <= packed; ++i) {
        const int q = (rank_ + i) % size_;
        trace::Span span("pack", op, q, n);
        as.pack(q, slot + static_cast<size_t>(q) * piece, off, n);
      }
    };
    SlotChannel ch(*this, desc, piece, std::ref(pack), own);
    drive(ch);
  });
}

}  // namespace commfuse::comm::shm
