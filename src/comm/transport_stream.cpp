// The streams' default implementations: each piece is packed into a staging buffer, moved
// with the transport's plain collective, and handed to the callbacks from the receive
// buffer. Correct on every transport; a transport with shared memory overrides them to
// skip both staging copies.
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

void deliver(const StreamPeerFn& on_piece, const StreamAllFn& on_all,
             const std::vector<const uint8_t*>& parts, int r, uint64_t off, uint64_t n) {
  if (n == 0) return;
  const int w = static_cast<int>(parts.size());
  if (on_piece)
    for (int i = 0; i < w; ++i) {
      const int q = (r + i) % w;
      trace::Span span("compute", "stream", q, n);
      on_piece(q, parts[q], off, n);
    }
  if (on_all) {
    trace::Span span("reduce", "stream", -1, n);
    on_all(parts.data(), off, n);
  }
}

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

void Transport::gather_stream(const GatherStream& s) {
  staged("gather_stream", [&] { staged_gather(s); });
}

void Transport::all_to_all_stream(const AllToAllStream& s) {
  staged("all_to_all_stream", [&] { staged_all_to_all(s); });
}

void Transport::staged_gather(const GatherStream& s) {
  const int r = rank();
  const int w = size();
  const uint64_t piece = stream_piece_bytes(s.bytes, s.unit, s.max_piece, kDefaultPieceBytes);
  std::vector<uint8_t> mine(std::min(piece, s.bytes));
  std::vector<uint8_t> all(mine.size() * static_cast<size_t>(w));
  std::vector<const uint8_t*> parts(static_cast<size_t>(w));
  uint64_t off = 0;
  do {  // at least once, so an empty stream still synchronizes
    const uint64_t n = std::min(piece, s.bytes - off);
    if (n != 0) {
      trace::Span span("pack", "gather_stream", r, n);
      s.pack(mine.data(), off, n);
    }
    {
      trace::Span span("transfer", "gather_stream", -1, n);
      all_gather(mine.data(), all.data(), n, DType::kInt8);
    }
    for (int q = 0; q < w; ++q) parts[q] = all.data() + static_cast<size_t>(q) * n;
    deliver(s.on_piece, s.on_all, parts, r, off, n);
    off += n;
  } while (off < s.bytes);
}

void Transport::staged_all_to_all(const AllToAllStream& s) {
  const int r = rank();
  const int w = size();
  const uint64_t piece = stream_piece_bytes(s.bytes, s.unit, s.max_piece, kDefaultPieceBytes);
  const size_t cap = std::min(piece, s.bytes);
  std::vector<uint8_t> out(cap * static_cast<size_t>(w));
  std::vector<uint8_t> in(out.size());
  std::vector<const uint8_t*> parts(static_cast<size_t>(w));
  uint64_t off = 0;
  do {
    const uint64_t n = std::min(piece, s.bytes - off);
    if (n != 0)
      for (int i = 1; i <= w; ++i) {  // peers first, this rank last (as on shm)
        const int q = (r + i) % w;
        trace::Span span("pack", "all_to_all_stream", q, n);
        s.pack(q, out.data() + static_cast<size_t>(q) * n, off, n);
      }
    {
      trace::Span span("transfer", "all_to_all_stream", -1, n);
      all_to_all(out.data(), in.data(), n, DType::kInt8);
    }
    for (int q = 0; q < w; ++q) parts[q] = in.data() + static_cast<size_t>(q) * n;
    deliver(s.on_piece, s.on_all, parts, r, off, n);
    off += n;
  } while (off < s.bytes);
}

}  // namespace commfuse::comm
