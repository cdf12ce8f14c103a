// The streams on shared memory: pack writes straight into this rank's slot and the
// callbacks read the peers' slots in place, so a piece is copied at most once (by pack)
// and fused ops compute on peer data without staging it. A gather_stream whose op gives
// its source and a landing place (gather_out) may instead read the peers' sources with
// CMA straight there: one copy, where the slots' pack plus the op's copy to gather_out
// make two. Steps follow the collectives' protocol (shm_transport.hpp); a unit too large
// for a slot falls back to the staged default.
#include <algorithm>
#include <vector>

#include "comm/fault.hpp"
#include "comm/shm/shm_transport.hpp"
#include "core/trace.hpp"

namespace commfuse::comm::shm {

void ShmTransport::gather_stream(const GatherStream& gs) {
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
    run(desc, [&](const char* op) { gather_stream_cma(gs, desc, op); });
    return;
  }
  const uint64_t piece = stream_piece_bytes(gs.bytes, gs.unit, gs.max_piece, slot_bytes_);
  if (piece > slot_bytes_) {
    Transport::gather_stream(gs);
    return;
  }
  // The piece size is checked across ranks: different pieces would read wrong offsets.
  const CollDesc desc{CollOp::kGatherStream, DType::kInt8, gs.bytes, -1, piece};
  run(desc, [&](const char* op) {
    std::vector<const uint8_t*> parts(static_cast<size_t>(size_));
    for_each_step(op, gs.bytes, piece, [&](uint32_t s, uint64_t off, uint64_t n, bool first) {
      if (n != 0) {
        trace::Span span("pack", op, rank_, n);
        gs.pack(slot(rank_, s), off, n);
      }
      arrive(s, first, desc, op);
      for (int i = 0; i < size_; ++i) {
        const int q = (rank_ + i) % size_;  // own piece first: it needs no wait
        if (i != 0) {
          trace::Span span("wait", op, q);
          peers_.wait(q, 3 * s + 1, op);
        }
        parts[q] = slot(q, s);
        if (gs.on_piece && n != 0) {
          trace::Span span("compute", op, q, n);
          gs.on_piece(q, parts[q], off, n);
        }
      }
      if (gs.on_all && n != 0) {
        trace::Span span("reduce", op, -1, n);
        gs.on_all(parts.data(), off, n);
      }
    });
  });
}

void ShmTransport::gather_stream_cma(const GatherStream& gs, const CollDesc& desc, const char* op) {
  const uint64_t piece = desc.piece;
  if (!gs.land && gs.bytes > 0) scratch_.resize(std::max<size_t>(scratch_.size(), piece));
  cma_call(desc, op, gs.source, true, [&] {
    for (uint64_t off = 0, i = 0; off < gs.bytes; off += piece, ++i) {
      const uint64_t n = std::min(piece, gs.bytes - off);
      fault_point(rank_, op, i + 2);  // 0 and 1: cma_call's, before and after publishing
      if (gs.on_piece) {
        trace::Span span("compute", op, rank_, n);
        gs.on_piece(rank_, gs.source + off, off, n);
      }
      for (int j = 1; j < size_; ++j) {
        const int q = (rank_ + j) % size_;  // rotated, as the slots' steps
        uint8_t* dst = gs.land ? gs.land(q, off) : scratch_.data();
        {
          trace::Span span("read", op, q, n);
          read_peer(q, off, dst, n, op);
        }
        if (gs.on_piece) {
          trace::Span span("compute", op, q, n);
          gs.on_piece(q, dst, off, n);
        }
      }
    }
  });
}

void ShmTransport::all_to_all_stream(const AllToAllStream& as) {
  // Each step's slot holds one piece per destination, at q * piece.
  const uint64_t piece =
      stream_piece_bytes(as.bytes, as.unit, as.max_piece, slot_bytes_ / static_cast<size_t>(size_));
  if (piece * static_cast<uint64_t>(size_) > slot_bytes_) {
    Transport::all_to_all_stream(as);
    return;
  }
  const CollDesc desc{CollOp::kAllToAllStream, DType::kInt8, as.bytes, -1, piece};
  run(desc, [&](const char* op) {
    std::vector<const uint8_t*> parts(static_cast<size_t>(size_));
    for_each_step(op, as.bytes, piece, [&](uint32_t s, uint64_t off, uint64_t n, bool first) {
      if (n != 0)
        for (int i = 1; i <= size_; ++i) {  // peers first (they wait for it), own piece last
          const int q = (rank_ + i) % size_;
          trace::Span span("pack", op, q, n);
          as.pack(q, slot(rank_, s) + static_cast<size_t>(q) * piece, off, n);
        }
      arrive(s, first, desc, op);
      for (int i = 0; i < size_; ++i) {
        const int q = (rank_ + i) % size_;
        if (i != 0) {
          trace::Span span("wait", op, q);
          peers_.wait(q, 3 * s + 1, op);
        }
        parts[q] = slot(q, s) + static_cast<size_t>(rank_) * piece;
        if (as.on_piece && n != 0) {
          trace::Span span("compute", op, q, n);
          as.on_piece(q, parts[q], off, n);
        }
      }
      if (as.on_all && n != 0) {
        trace::Span span("reduce", op, -1, n);
        as.on_all(parts.data(), off, n);
      }
    });
  });
}

}  // namespace commfuse::comm::shm
