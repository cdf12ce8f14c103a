// The streams' default channels: each piece is packed into a staging buffer and moved with
// the transport's plain collective when published; the executor then reads every rank's
// piece from the receive buffer. Correct on every transport; a transport with shared
// memory overrides them to skip both staging copies.
#include <algorithm>
#include <vector>

#include "comm/call_check.hpp"
#include "comm/transport.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"

namespace commfuse::comm {
namespace {

// Pieces of a few MiB keep the staging buffers small and give the callbacks work to
// overlap with on transports that progress in the background.
constexpr uint64_t kDefaultPieceBytes = 4u << 20;

// What both staged channels share: the pieces (at least one, so that an empty stream still
// synchronizes the ranks) and the receive buffer, rank q's part of the current piece at
// q * piece.
class StagedChannel : public PieceChannel {
 public:
  StagedChannel(const char* op, int size, uint64_t bytes, uint64_t piece)
      : PieceChannel(bytes, piece, /*at_least_one=*/true),
        op_(op),
        in_(static_cast<size_t>(std::min(piece, bytes)) * static_cast<size_t>(size)) {}
  const char* op() const override { return op_; }
  const uint8_t* wait(int q, size_t i) override {
    return in_.data() + static_cast<size_t>(q) * piece_bytes(i);
  }

 protected:
  const char* op_;
  std::vector<uint8_t> in_;
};

class StagedGather final : public StagedChannel {
 public:
  StagedGather(Transport& t, const GatherStream& s, uint64_t piece)
      : StagedChannel("gather_stream", t.size(), s.bytes, piece),
        t_(t),
        s_(s),
        mine_(std::min(piece, s.bytes)) {}
  void publish(size_t i) override {
    const uint64_t n = piece_bytes(i);
    if (n != 0) {
      trace::Span span("pack", op_, t_.rank(), n);
      s_.pack(mine_.data(), piece_offset(i), n);
    }
    trace::Span span("transfer", op_, -1, n);
    t_.all_gather(mine_.data(), in_.data(), n, DType::kInt8);
  }

 private:
  Transport& t_;
  const GatherStream& s_;
  std::vector<uint8_t> mine_;
};

class StagedAllToAll final : public StagedChannel {
 public:
  StagedAllToAll(Transport& t, const AllToAllStream& s, uint64_t piece)
      : StagedChannel("all_to_all_stream", t.size(), s.bytes, piece),
        t_(t),
        s_(s),
        out_(in_.size()) {}
  void publish(size_t i) override {
    const uint64_t n = piece_bytes(i);
    const int r = t_.rank(), w = t_.size();
    if (n != 0)
      for (int k = 1; k <= w; ++k) {  // peers first, this rank last (as on shm)
        const int q = (r + k) % w;
        trace::Span span("pack", op_, q, n);
        s_.pack(q, out_.data() + static_cast<size_t>(q) * n, piece_offset(i), n);
      }
    trace::Span span("transfer", op_, -1, n);
    t_.all_to_all(out_.data(), in_.data(), n, DType::kInt8);
  }

 private:
  Transport& t_;
  const AllToAllStream& s_;
  std::vector<uint8_t> out_;
};

}  // namespace

uint64_t stream_piece_bytes(uint64_t bytes, uint64_t unit, uint64_t max_piece, uint64_t limit) {
  CF_ASSERT(unit > 0 && bytes % unit == 0);
  uint64_t cap = max_piece != 0 ? std::min(max_piece, limit) : limit;
  return std::max(unit, cap / unit * unit);
}

template <typename Body>
void Transport::staged(const char* op, Body&& body) {
  try {
    body();
  } catch (const CallFailed&) {  // every rank failed the first piece alike: still usable
    throw;
  } catch (const std::exception& e) {
    // A callback failed (a collective's own failure has aborted already: abort is then a
    // no-op): tell the peers, who are waiting in the next piece's collective.
    abort(detail::cat(op, "(rank ", rank(), "): ", e.what()));
    throw;
  }
}

void Transport::open_gather_stream(const GatherStream& s, const PieceDriver& drive) {
  // The channel (its buffers) inside staged(): a failure to make it aborts the group too.
  staged("gather_stream", [&] {
    StagedGather ch(*this, s, stream_piece_bytes(s.bytes, s.unit, s.max_piece, kDefaultPieceBytes));
    drive(ch);
  });
}

void Transport::open_all_to_all_stream(const AllToAllStream& s, const PieceDriver& drive) {
  staged("all_to_all_stream", [&] {
    StagedAllToAll ch(*this, s,
                      stream_piece_bytes(s.bytes, s.unit, s.max_piece, kDefaultPieceBytes));
    drive(ch);
  });
}

}  // namespace commfuse::comm
