// Rendezvous of the ranks of a group over TCP and exchange of small blobs (shm segment
// names, host ids, pids) while a communicator is created. Star topology: rank 0 listens,
// every other rank holds one connection to it, and rank 0 runs each collective in the
// calling thread (collectives are called by every rank, so no helper thread is needed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/bootstrap/socket.hpp"
#include "comm/bootstrap/wire.hpp"

namespace commfuse::comm {

// Not thread-safe: one thread per rank drives it, like any collective.
class Bootstrap {
 public:
  // Forms the group. Rank 0 listens on host:port and waits for the other world_size-1
  // ranks; the others connect (retrying until the deadline) and wait for rank 0 to
  // confirm the group. Every wait is bounded by timeout_s. Errors (SPEC §0):
  //   PARAM_INVALID  bad arguments; ranks disagree on world_size; two processes claim
  //                  one rank. Detected by rank 0 and delivered to every connected rank.
  //   RUNTIME_ERROR  rank 0 cannot listen (port in use); rank 0 unreachable; ranks that
  //                  did not connect in time (named); ranks that connected, then closed
  //                  their connection and did not come back within kRejoinGrace.
  // world_size 1 needs no network and opens no socket.
  static std::unique_ptr<Bootstrap> create(const std::string& host, int port, int rank,
                                           int world_size, int timeout_s);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Collective: every rank passes a blob (any bytes, any length, may differ per rank) and
  // gets all blobs in rank order. Bounded by timeout_s per call. A rank that dies or
  // stalls is named in a RUNTIME_ERROR on every surviving rank. After any error the
  // object is unusable: later calls throw RUNTIME_ERROR repeating the first error.
  std::vector<std::string> all_gather(const std::string& blob);
  void barrier();

  // Closes every socket; the port is free for a new group afterwards.
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

 private:
  Bootstrap(std::string host, int port, int rank, int world_size, int timeout_s);

  std::string who() const;  // "bootstrap(rank 3)", the prefix of this rank's messages
  void check_usable() const;
  std::vector<std::string> collective(wire::FrameType op, const std::string& blob);

  // Rank 0 (bootstrap_root.cpp).
  void root_accept();
  std::vector<std::string> root_collective(wire::FrameType op, const std::string& blob);
  // Sends the error to every connected rank, closes all connections, throws.
  [[noreturn]] void root_fail(Status code, const std::string& message);

  // Other ranks (bootstrap_peer.cpp).
  void peer_join();
  std::vector<std::string> peer_collective(wire::FrameType op, const std::string& blob);
  // Closes the connection to rank 0 and throws.
  [[noreturn]] void peer_fail(Status code, const std::string& message);

  std::string host_;
  int port_;
  int rank_;
  int world_size_;
  int timeout_s_;
  uint32_t seq_ = 0;            // number of the current collective call
  std::vector<net::Fd> peers_;  // rank 0: peers_[r] is the connection to rank r
  net::Fd root_;                // other ranks: the connection to rank 0
  std::string broken_;          // the first error; non-empty = unusable
};

}  // namespace commfuse::comm
