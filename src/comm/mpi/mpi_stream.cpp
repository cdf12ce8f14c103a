// The streams over MPI, pipelined (mpi_pipeline.hpp): after the descriptor exchange every
// piece's receives are posted at once into a staging buffer; this rank packs piece i and
// sends it, then hands piece i-1 to the callbacks — so piece i is on the wire while piece
// i-1 is computed on, and the computation never waits for the whole transfer. A progress
// thread keeps Open MPI moving bytes during the computation where MPI's thread level allows
// (it moves bytes only inside MPI calls); otherwise the transfers are polled between
// blocks. Pieces default to 1 MiB. Only the packed bytes cross the wire.
//
// Limitation: a callback that throws on one rank (an internal failure: the ops validate
// before they communicate) is reported to its peers by the deadline (COMMFUSE_TIMEOUT_S),
// not at once as on shm: they are waiting for data, not for a descriptor.
#if COMMFUSE_HAVE_MPI
#include <algorithm>
#include <vector>

#include "comm/fault.hpp"
#include "comm/mpi/mpi_pipeline.hpp"
#include "comm/mpi/mpi_transport.hpp"
#include "core/trace.hpp"

namespace commfuse::comm::mpi {
namespace {

constexpr int kStreamTag = 3;  // descriptors use 1, collectives 2
constexpr uint64_t kStreamPieceBytes = 1u << 20;

struct Piece {
  uint64_t off, n;
};

std::vector<Piece> pieces_of(uint64_t bytes, uint64_t piece) {
  std::vector<Piece> v;
  for (uint64_t off = 0; off < bytes; off += piece)
    v.push_back({off, std::min(piece, bytes - off)});
  return v;
}

}  // namespace

void MpiTransport::gather_stream(const GatherStream& gs) {
  const uint64_t piece = stream_piece_bytes(gs.bytes, gs.unit, gs.max_piece, kStreamPieceBytes);
  // The piece size is checked across ranks: different pieces would mismatch messages.
  const CollDesc desc{CollOp::kGatherStream, DType::kInt8, gs.bytes, -1, piece};
  run_fn(desc, [&](const char* op) {
    const auto pieces = pieces_of(gs.bytes, piece);
    const size_t R = static_cast<size_t>(size_);
    // The op's own places where it gives them (GatherStream::source and land: sends straight
    // from x1, receives straight into gather_out), else a staging buffer, rank q's bytes at
    // q * bytes. Either way the same messages go on the wire, so each rank decides alone.
    // (At 4096x4096x64 bf16, W = 2 over TCP, staging cost the fused op 2 x 16 MiB of copies
    // the unfused all_gather does not make.)
    uint8_t* staging = gs.land ? nullptr : stream_buffer(gs.bytes * R);
    auto at = [&](int q, uint64_t off) {
      if (q == rank_ && gs.source != nullptr)  // MPI only reads a send buffer
        return const_cast<uint8_t*>(gs.source) + off;
      return gs.land ? gs.land(q, off) : staging + q * gs.bytes + off;
    };
    Pipeline pipe(comm_, kStreamTag, rank_, op, timeout_s_, oversubscribed_, pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i)
      for (int k = 1; k < size_; ++k) {
        const int q = (rank_ + size_ - k) % size_;
        pipe.expect(i, {q, at(q, pieces[i].off), pieces[i].n});
      }
    pipe.start();
    std::vector<const uint8_t*> parts(R);
    auto deliver = [&](size_t i) {
      const Piece& p = pieces[i];
      if (gs.on_piece) {
        trace::Span span("compute", op, rank_, p.n);
        gs.on_piece(rank_, at(rank_, p.off), p.off, p.n);
      }
      {
        trace::Span span("wait", op, -1, p.n);
        pipe.wait(i);
      }
      for (int k = 0; k < size_; ++k) parts[k] = at(k, p.off);
      for (int k = 1; k < size_ && gs.on_piece; ++k) {
        const int q = (rank_ + k) % size_;
        trace::Span span("compute", op, q, p.n);
        gs.on_piece(q, parts[q], p.off, p.n);
        pipe.poll();
      }
      if (gs.on_all) {
        trace::Span span("reduce", op, -1, p.n);
        gs.on_all(parts.data(), p.off, p.n);
      }
    };
    for (size_t i = 0; i <= pieces.size(); ++i) {
      if (i < pieces.size()) {
        const Piece& p = pieces[i];
        fault_point(rank_, op, i);
        if (gs.source == nullptr) {
          trace::Span span("pack", op, rank_, p.n);
          gs.pack(at(rank_, p.off), p.off, p.n);
        }
        std::vector<Pipeline::Transfer> sends;
        for (int k = 1; k < size_; ++k)
          sends.push_back({(rank_ + k) % size_, at(rank_, p.off), p.n});
        pipe.send(i, std::move(sends));
      }
      if (i >= 1) deliver(i - 1);
    }
    pipe.finish();
  });
}

void MpiTransport::all_to_all_stream(const AllToAllStream& as) {
  const uint64_t piece = stream_piece_bytes(as.bytes, as.unit, as.max_piece, kStreamPieceBytes);
  const CollDesc desc{CollOp::kAllToAllStream, DType::kInt8, as.bytes, -1, piece};
  run_fn(desc, [&](const char* op) {
    const auto pieces = pieces_of(as.bytes, piece);
    const size_t R = static_cast<size_t>(size_);
    // out: what this rank sends, destination q's bytes at q * bytes; in: what it receives,
    // from rank q at q * bytes (its own piece is packed straight into in).
    uint8_t* in = stream_buffer(2 * as.bytes * R);
    uint8_t* out = in + as.bytes * R;
    auto at = [&](uint8_t* b, int q, uint64_t off) { return b + q * as.bytes + off; };
    Pipeline pipe(comm_, kStreamTag, rank_, op, timeout_s_, oversubscribed_, pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i)
      for (int k = 1; k < size_; ++k) {
        const int q = (rank_ + size_ - k) % size_;
        pipe.expect(i, {q, at(in, q, pieces[i].off), pieces[i].n});
      }
    pipe.start();
    std::vector<const uint8_t*> parts(R);
    auto deliver = [&](size_t i) {
      const Piece& p = pieces[i];
      {
        trace::Span span("wait", op, -1, p.n);
        pipe.wait(i);
      }
      for (int k = 0; k < size_; ++k) parts[k] = at(in, k, p.off);
      for (int k = 0; k < size_ && as.on_piece; ++k) {
        const int q = (rank_ + k) % size_;
        trace::Span span("compute", op, q, p.n);
        as.on_piece(q, parts[q], p.off, p.n);
        pipe.poll();
      }
      if (as.on_all) {
        trace::Span span("reduce", op, -1, p.n);
        as.on_all(parts.data(), p.off, p.n);
      }
    };
    for (size_t i = 0; i <= pieces.size(); ++i) {
      if (i < pieces.size()) {
        const Piece& p = pieces[i];
        fault_point(rank_, op, i);
        std::vector<Pipeline::Transfer> sends;
        for (int k = 1; k <= size_; ++k) {  // peers first, so their data leaves early
          const int q = (rank_ + k) % size_;
          trace::Span span("pack", op, q, p.n);
          uint8_t* dst = q == rank_ ? at(in, q, p.off) : at(out, q, p.off);
          as.pack(q, dst, p.off, p.n);
          if (q != rank_) sends.push_back({q, dst, p.n});
        }
        pipe.send(i, std::move(sends));
      }
      if (i >= 1) deliver(i - 1);
    }
    pipe.finish();
  });
}

}  // namespace commfuse::comm::mpi
#endif  // COMMFUSE_HAVE_MPI
