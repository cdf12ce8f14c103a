// Pieces shared by the rank-0 and peer halves of the bootstrap protocol.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "comm/bootstrap/socket.hpp"
#include "core/error.hpp"

namespace commfuse::comm::boot {

// Peers wait this much longer than rank 0 for an answer, so that when rank 0 gives up
// (e.g. a rank never arrived) its verdict, which names the culprit, reaches them before
// their own timer fires with a vaguer message.
constexpr std::chrono::milliseconds kPeerGrace{1000};
// How long rank 0 spends delivering an error: sending it, and reading until the peers
// close so that the close does not turn into a reset that could discard the message.
constexpr std::chrono::milliseconds kErrorGrace{1000};
// After rank 0 has found a fatal error while the group forms, it keeps answering late
// arrivals with that error for this long, so they fail with the same message.
constexpr std::chrono::milliseconds kErrorLinger{1000};
// A rank that sent its hello and then closed its connection while the group formed (stopped
// with Ctrl-C, or died) may be started again: once every other rank has joined, rank 0
// waits this long for it before failing the group naming it (not COMMFUSE_TIMEOUT_S: a rank
// that died had been found at once, at the welcome).
constexpr std::chrono::milliseconds kRejoinGrace{3000};

// Rank 0's refusal of a group it cannot form (bootstrap.cpp: too many ranks for its open-file
// limit), told to the ranks that connect within kErrorLinger (each gets `message` as if from
// a formed group's verdict), then thrown. At most 64 told connections are held at a time, so
// the refusal itself needs few files. A rank still queued when the listener closes gets a
// reset connection, and one arriving later cannot reach rank 0: both fail naming rank 0.
[[noreturn]] void refuse_group(const std::string& host, int port, int world_size, Status code,
                               const std::string& message);

// Why an I/O call failed, for messages: "connection closed", "Connection reset by peer".
std::string io_reason(net::Io io, int err);

}  // namespace commfuse::comm::boot
