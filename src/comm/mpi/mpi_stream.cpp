// The streams' channels over MPI, pipelined (mpi_pipeline.hpp; the executor's loop is
// exec/stream.cpp): after the descriptor exchange every piece's receives are posted at once;
// publishing piece i packs and sends it, and the channel's lookahead of 1 makes the executor
// publish piece i before it computes on piece i-1 — so piece i is on the wire while piece
// i-1 is computed on, and the computation never waits for the whole transfer. Open MPI moves
// bytes only inside MPI calls: the transfers are polled between blocks, or by a progress
// thread where a core is left free for it and MPI's thread level allows
// (WaitRules::progress_thread, mpi_pipeline.hpp). Pieces default to 1 MiB. Only the packed bytes
// cross the wire, or, where the op gives its source or view, its bytes sent from there.
//
// Limitation: a callback that throws on one rank (an internal failure: the ops validate
// before they communicate) is reported to its peers by the deadline (COMMFUSE_TIMEOUT_S),
// not at once as on shm: they are waiting for data, not for a descriptor. A stream abandoned
// by a failure frees its send requests without waiting for them (Pipeline's destructor): a
// send from the op's source or view may then still read that memory after the call has
// failed, and the group is aborted by then.
#if COMMFUSE_HAVE_MPI
#include <algorithm>
#include <functional>
#include <vector>

#include "comm/fault.hpp"
#include "comm/mpi/mpi_pipeline.hpp"
#include "comm/mpi/mpi_transport.hpp"
#include "core/trace.hpp"

namespace commfuse::comm::mpi {
namespace {

constexpr int kStreamTag = 3;  // descriptors use 1, collectives 2
constexpr uint64_t kStreamPieceBytes = 1u << 20;

// A stream's pieces over a started Pipeline. Waiting for a peer's piece waits for every
// receive of that piece (they were posted together); this rank's own piece is where it
// packed it (or in the op's source), ready once published, or where the op's `view` says.
class PipelineChannel final : public PieceChannel {
 public:
  // Where rank q's bytes at off are (received into, or packed into for this rank).
  using Place = std::function<uint8_t*(int q, uint64_t off)>;
  // Packs this rank's piece [off, off + n) and says what to send where.
  using Publish = std::function<std::vector<Pipeline::Transfer>(uint64_t off, uint64_t n)>;
  // This rank's part for itself, where the op has it, when waited for (not packed).
  using Own = std::function<const uint8_t*(uint64_t off, uint64_t n)>;
  PipelineChannel(Pipeline& pipe, int rank, const char* op, uint64_t bytes, uint64_t piece,
                  Place place, Publish publish, Own own = {})
      : PieceChannel(bytes, piece, false),
        pipe_(pipe),
        rank_(rank),
        op_(op),
        place_(std::move(place)),
        publish_(std::move(publish)),
        own_(std::move(own)) {}
  const char* op() const override { return op_; }
  size_t lookahead() const override { return 1; }
  void publish(size_t i) override {
    fault_point(rank_, op_, i);
    pipe_.send(i, publish_(piece_offset(i), piece_bytes(i)));
  }
  const uint8_t* wait(int q, size_t i) override {
    if (q == rank_ && own_ && piece_bytes(i) != 0) return own_(piece_offset(i), piece_bytes(i));
    if (q != rank_ && arrived_ <= i) {
      pipe_.wait(i);
      arrived_ = i + 1;
    }
    return place_(q, piece_offset(i));
  }
  void progress() override { pipe_.poll(); }

  static size_t pieces_of(uint64_t bytes, uint64_t piece) {
    return static_cast<size_t>((bytes + piece - 1) / piece);
  }

 private:
  Pipeline& pipe_;
  int rank_;
  const char* op_;
  Place place_;
  Publish publish_;
  Own own_;
  size_t arrived_ = 0;  // pieces before it have been waited for
};

}  // namespace

void MpiTransport::open_gather_stream(const GatherStream& gs, const PieceDriver& drive) {
  const uint64_t piece = stream_piece_bytes(gs.bytes, gs.unit, gs.max_piece, kStreamPieceBytes);
  // The piece size is checked across ranks: different pieces would mismatch messages.
  const CollDesc desc{CollOp::kGatherStream, DType::kInt8, gs.bytes, -1, piece};
  run_fn(desc, [&](const char* op) {
    const size_t pieces = PipelineChannel::pieces_of(gs.bytes, piece);
    // The op's own places where it gives them (GatherStream::source and land: sends straight
    // from x1, receives straight into gather_out), else a staging buffer, rank q's bytes at
    // q * bytes. Either way the same messages go on the wire, so each rank decides alone.
    // (At 4096x4096x64 bf16, W = 2 over TCP, staging cost the fused op 2 x 16 MiB of copies
    // the unfused all_gather does not make.)
    uint8_t* staging = gs.land ? nullptr : stream_buffer(gs.bytes * static_cast<size_t>(size_));
    auto at = [&](int q, uint64_t off) {
      if (q == rank_ && gs.source != nullptr)  // MPI only reads a send buffer
        return const_cast<uint8_t*>(gs.source) + off;
      return gs.land ? gs.land(q, off) : staging + q * gs.bytes + off;
    };
    Pipeline pipe(comm_, kStreamTag, rank_, op, waits_, pieces);
    for (size_t i = 0; i < pieces; ++i)
      for (int k = 1; k < size_; ++k) {
        const int q = (rank_ + size_ - k) % size_;
        pipe.expect(i, {q, at(q, i * piece), std::min(piece, gs.bytes - i * piece)});
      }
    pipe.start();
    PipelineChannel ch(pipe, rank_, op, gs.bytes, piece, at, [&](uint64_t off, uint64_t n) {
      if (gs.source == nullptr) {
        trace::Span span("pack", op, rank_, n);
        gs.pack(at(rank_, off), off, n);
      }
      std::vector<Pipeline::Transfer> sends;
      for (int k = 1; k < size_; ++k) sends.push_back({(rank_ + k) % size_, at(rank_, off), n});
      return sends;
    });
    drive(ch);
    pipe.finish();
  });
}

void MpiTransport::open_all_to_all_stream(const AllToAllStream& as, const PieceDriver& drive) {
  const uint64_t piece = stream_piece_bytes(as.bytes, as.unit, as.max_piece, kStreamPieceBytes);
  const CollDesc desc{CollOp::kAllToAllStream, DType::kInt8, as.bytes, -1, piece};
  run_fn(desc, [&](const char* op) {
    const size_t pieces = PipelineChannel::pieces_of(as.bytes, piece);
    const size_t R = static_cast<size_t>(size_);
    // Where this rank's parts are: in the op's source, in place where its view says, or
    // packed into out (destination q's bytes at q * bytes). in: what it receives, from rank
    // q at q * bytes (a packed own part too). Either way the same messages go on the wire,
    // so each rank decides alone.
    const bool from_source = as.source != nullptr;
    const bool viewed = !from_source && as.view != nullptr;
    uint8_t* in = stream_buffer((from_source || viewed ? 1 : 2) * as.bytes * R);
    uint8_t* out = from_source ? const_cast<uint8_t*>(as.source)
                   : viewed    ? nullptr
                               : in + as.bytes * R;
    auto at = [&](uint8_t* b, int q, uint64_t off) { return b + q * as.bytes + off; };
    Pipeline pipe(comm_, kStreamTag, rank_, op, waits_, pieces);
    for (size_t i = 0; i < pieces; ++i)
      for (int k = 1; k < size_; ++k) {
        const int q = (rank_ + size_ - k) % size_;
        pipe.expect(i, {q, at(in, q, i * piece), std::min(piece, as.bytes - i * piece)});
      }
    pipe.start();
    auto place = [&](int q, uint64_t off) {
      return at(from_source && q == rank_ ? out : in, q, off);  // own part: in the source
    };
    // With the op's view, publish sends each peer's part from where the op has it (no
    // pack), and this rank's part for itself is read there when the executor waits for it,
    // after the peers' parts were sent: matmul_reduce_scatter multiplies its own rows while
    // the peers' move, where packing them first had posted the peer's 512 KiB 650 us late
    // (W = 2 over TCP, 4096×4096×64). 256×1024×256: 0.98-1.01x -> 1.05-1.06x its
    // composition. Sending from the view instead of a packed copy then took 4096×4096×64
    // bf16 from 0.92-0.98x to 0.99-1.02x (matmul_all_reduce 0.95-0.96x -> 0.98x); the
    // transfer's socket copies still run on the computing core (AMX Xeon).
    PipelineChannel::Own own;
    auto own_in_view = [&](uint64_t off, uint64_t n) { return as.view(rank_, off, n); };
    if (viewed) own = std::ref(own_in_view);
    const int parts = viewed ? size_ - 1 : size_;
    PipelineChannel ch(
        pipe, rank_, op, as.bytes, piece, place,
        [&](uint64_t off, uint64_t n) {
          std::vector<Pipeline::Transfer> sends;
          for (int k = 1; k <= parts; ++k) {  // peers first, so their data leaves early
            const int q = (rank_ + k) % size_;
            uint8_t* dst = viewed ? const_cast<uint8_t*>(as.view(q, off, n))  // MPI only reads it
                           : q == rank_ ? place(q, off)
                                        : at(out, q, off);
            if (!viewed && !from_source) {
              trace::Span span("pack", op, q, n);
              as.pack(q, dst, off, n);
            }
            if (q != rank_) sends.push_back({q, dst, n});
          }
          return sends;
        },
        own);
    drive(ch);
    pipe.finish();
  });
}

}  // namespace commfuse::comm::mpi
#endif  // COMMFUSE_HAVE_MPI
