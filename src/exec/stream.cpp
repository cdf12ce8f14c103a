// The stream executor's loop (stream.hpp). The transports differ only in their channels:
// shm slots (publish = pack into the slot and raise its flag), shm CMA (wait = read the
// peer's memory), MPI (publish = send, lookahead 1) and the staged default (publish = the
// plain collective).
#include "exec/stream.hpp"

#include "core/small_vector.hpp"
#include "core/trace.hpp"

namespace commfuse::exec {
namespace {

// The channel this thread's drive() runs (between_blocks), restored on the way out.
thread_local comm::PieceChannel* t_channel = nullptr;

class CurrentChannel {
 public:
  explicit CurrentChannel(comm::PieceChannel* ch) : previous_(t_channel) { t_channel = ch; }
  ~CurrentChannel() { t_channel = previous_; }
  CurrentChannel(const CurrentChannel&) = delete;
  CurrentChannel& operator=(const CurrentChannel&) = delete;

 private:
  comm::PieceChannel* previous_;
};

void deliver(comm::PieceChannel& ch, size_t i, int rank, int size,
             const comm::StreamPeerFn& on_piece, const comm::StreamAllFn& on_all,
             const uint8_t** parts) {
  const uint64_t off = ch.piece_offset(i);
  const uint64_t n = ch.piece_bytes(i);
  for (int k = 0; k < size; ++k) {
    const int q = (rank + k) % size;  // own piece first: it needs no wait
    parts[static_cast<size_t>(q)] = wait_piece(ch, rank, q, i);
    if (on_piece && n != 0) {
      trace::Span span("compute", ch.op(), q, n);
      on_piece(q, parts[static_cast<size_t>(q)], off, n);
      ch.progress();
    }
  }
  if (on_all && n != 0) {
    trace::Span span("reduce", ch.op(), -1, n);
    on_all(parts, off, n);
  }
  ch.release(i);
}

}  // namespace

const uint8_t* wait_piece(comm::PieceChannel& ch, int rank, int q, size_t i) {
  if (q == rank) return ch.wait(q, i);
  trace::Span span(ch.wait_span(), ch.op(), q, ch.piece_bytes(i));
  return ch.wait(q, i);
}

void drive(comm::PieceChannel& ch, int rank, int size, const comm::StreamPeerFn& on_piece,
           const comm::StreamAllFn& on_all) {
  const CurrentChannel current(&ch);
  SmallVector<const uint8_t*, 16> parts(static_cast<size_t>(size));
  const size_t pieces = ch.pieces();
  const size_t ahead = ch.lookahead();
  for (size_t i = 0; i < pieces + ahead; ++i) {
    if (i < pieces) ch.publish(i);
    if (i >= ahead) deliver(ch, i - ahead, rank, size, on_piece, on_all, parts.data());
  }
}

void between_blocks() {
  if (t_channel != nullptr) t_channel->progress();
}

void gather_stream(comm::Transport& t, const comm::GatherStream& s) {
  t.open_gather_stream(
      s, [&](comm::PieceChannel& ch) { drive(ch, t.rank(), t.size(), s.on_piece, s.on_all); });
}

void all_to_all_stream(comm::Transport& t, const comm::AllToAllStream& s) {
  t.open_all_to_all_stream(
      s, [&](comm::PieceChannel& ch) { drive(ch, t.rank(), t.size(), s.on_piece, s.on_all); });
}

}  // namespace commfuse::exec
