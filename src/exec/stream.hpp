// The stream executor: the one piece loop of every fused schedule. An op describes a stream
// (comm::GatherStream, comm::AllToAllStream: what to pack, what to compute on each piece);
// the transport moves the pieces (comm::PieceChannel: publish, wait, release); this loop
// decides the order — publish piece i (and the transport's lookahead beyond it), then for
// every rank q, this rank first, wait for q's piece i and compute on it, then the op's
// on_all — and records the trace spans of the waits and the computation. "Where does
// all_gather_matmul wait for rank 3's rows" has one answer: wait_piece below.
#pragma once

#include "comm/transport.hpp"

namespace commfuse::exec {

// Every rank contributes s.bytes and computes on every rank's, piece by piece.
void gather_stream(comm::Transport& t, const comm::GatherStream& s);
// Every rank sends s.bytes to every rank and computes on what each sent it.
void all_to_all_stream(comm::Transport& t, const comm::AllToAllStream& s);

// The loop itself over a channel the transport opened (rank and size of its group).
void drive(comm::PieceChannel& ch, int rank, int size, const comm::StreamPeerFn& on_piece,
           const comm::StreamAllFn& on_all);

// Rank q's piece i, waited for (a span of the channel's wait kind when q is a peer).
const uint8_t* wait_piece(comm::PieceChannel& ch, int rank, int q, size_t i);

// For an op's callback that computes in several blocks (a GEMM in row blocks): between two
// blocks, lets the transfers of the stream this thread is driving move
// (PieceChannel::progress: MPI polled inline moves bytes only inside MPI calls, so a
// rendezvous started while this rank computes its own rows would otherwise wait for the
// end of them). Does nothing outside a stream.
void between_blocks();

}  // namespace commfuse::exec
