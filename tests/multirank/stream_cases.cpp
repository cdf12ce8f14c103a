// The transport streams (comm/transport.hpp) through the communicator's real transport:
// every rank's data arrives intact, in the promised order, in pieces of the promised size,
// on the shm fast path, on its staged fallback (a unit larger than a slot) and on MPI.
// A callback that throws on one rank fails every rank instead of hanging them.
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/comm_impl.hpp"
#include "comm/shm/shm_transport.hpp"
#include "core/algorithm.hpp"
#include "exec/stream.hpp"

namespace {

int g_stream_failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++g_stream_failures;
  std::fprintf(stderr, "FAILED streams: %s\n", what.c_str());
}

uint8_t pattern(int from, int to, uint64_t i) {
  return static_cast<uint8_t>((from * 37 + to * 11 + i * 13 + i / 251) & 0xFF);
}

struct Shape {
  uint64_t units, unit, max_piece;
  std::string str() const {
    return "units " + std::to_string(units) + " unit " + std::to_string(unit) + " max_piece " +
           std::to_string(max_piece);
  }
};

void check_piece(const Shape& sh, uint64_t off, uint64_t n, const std::string& what) {
  expect(n > 0 && n % sh.unit == 0 && off % sh.unit == 0,
         what + ": piece off " + std::to_string(off) + " n " + std::to_string(n));
  if (sh.max_piece >= sh.unit) expect(n <= sh.max_piece, what + ": piece above max_piece");
}

void gather(commfuse::comm::Transport& t, const Shape& sh) {
  const int R = t.size(), me = t.rank();
  const std::string what = "gather_stream " + sh.str();
  commfuse::comm::GatherStream gs;
  gs.bytes = sh.units * sh.unit;
  gs.unit = sh.unit;
  gs.max_piece = sh.max_piece;
  std::vector<uint64_t> seen(static_cast<size_t>(R), 0);
  uint64_t all_seen = 0;
  int expected_next = 0;  // index i of (me + i) % R expected next within a piece
  gs.pack = [&](uint8_t* dst, uint64_t off, uint64_t n) {
    check_piece(sh, off, n, what);
    for (uint64_t i = 0; i < n; ++i) dst[i] = pattern(me, 0, off + i);
  };
  gs.on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
    expect(src == (me + expected_next) % R, what + ": order, got rank " + std::to_string(src));
    expected_next = (expected_next + 1) % R;
    expect(off == seen[src], what + ": rank " + std::to_string(src) + " piece out of sequence");
    for (uint64_t i = 0; i < n; ++i)
      if (data[i] != pattern(src, 0, off + i)) {
        expect(false, what + ": data of rank " + std::to_string(src));
        break;
      }
    seen[src] += n;
  };
  gs.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
    expect(off == all_seen, what + ": on_all out of sequence");
    for (int q = 0; q < R; ++q)
      expect(parts[q][n - 1] == pattern(q, 0, off + n - 1), what + ": on_all part order");
    all_seen += n;
  };
  commfuse::exec::gather_stream(t, gs);
  for (int q = 0; q < R; ++q) expect(seen[q] == gs.bytes, what + ": bytes seen");
  expect(all_seen == gs.bytes, what + ": on_all bytes");
}

// With `source` the rank's bytes also lie in one buffer, destination to's at to * bytes,
// which a single-copy transport reads in place (shm with CMA) instead of calling pack.
void all_to_all(commfuse::comm::Transport& t, const Shape& sh, bool with_source) {
  const int R = t.size(), me = t.rank();
  const std::string what = "all_to_all_stream " + sh.str() + (with_source ? " with source" : "");
  commfuse::comm::AllToAllStream as;
  as.bytes = sh.units * sh.unit;
  as.unit = sh.unit;
  as.max_piece = sh.max_piece;
  std::vector<uint8_t> source;
  if (with_source) {
    source.resize(as.bytes * static_cast<uint64_t>(R));
    for (int to = 0; to < R; ++to)
      for (uint64_t i = 0; i < as.bytes; ++i) source[to * as.bytes + i] = pattern(me, to, i);
    as.source = source.data();
  }
  std::vector<uint64_t> seen(static_cast<size_t>(R), 0);
  as.pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) {
    check_piece(sh, off, n, what);
    for (uint64_t i = 0; i < n; ++i) dst[i] = pattern(me, to, off + i);
  };
  as.on_piece = [&](int src, const uint8_t* data, uint64_t off, uint64_t n) {
    expect(off == seen[src], what + ": piece out of sequence");
    for (uint64_t i = 0; i < n; ++i)
      if (data[i] != pattern(src, me, off + i)) {
        expect(false, what + ": data from rank " + std::to_string(src));
        break;
      }
    seen[src] += n;
  };
  as.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t) {
    for (int q = 0; q < R; ++q)
      expect(parts[q][0] == pattern(q, me, off), what + ": on_all part order");
  };
  commfuse::exec::all_to_all_stream(t, as);
  for (int q = 0; q < R; ++q) expect(seen[q] == as.bytes, what + ": bytes seen");
}

}  // namespace

// The group's CMA crossover (comm_create.cpp): the same on every rank, a power of two CMA
// can use, and where ranks share cores one the group measured (shm_crossover.cpp).
void check_crossover(commfuse::comm::Transport& t) {
  auto* shm = dynamic_cast<commfuse::comm::shm::ShmTransport*>(&t);
  if (shm == nullptr) return;
  const uint64_t mine = shm->cma_min_bytes();
  std::vector<uint64_t> all(static_cast<size_t>(t.size()));
  t.all_gather(&mine, all.data(), sizeof mine, commfuse::DType::kInt8);
  for (const uint64_t b : all) expect(b == mine, "every rank has the same CMA crossover");
  expect(mine >= 4096 && mine <= (uint64_t{4} << 20) && (mine & (mine - 1)) == 0,
         "the crossover is a power of two in [4 KiB, 4 MiB]");
  if (t.ranks_per_core() > 1 && t.size() > 1) {
    expect(shm->shared_cores_measured(), "ranks sharing cores time their collectives at set-up");
    if (shm->cma_available() && commfuse::forced_algorithm("all_to_all").empty()) {
      bool probed = mine == (uint64_t{4} << 20);
      for (const uint64_t b : commfuse::comm::shm::kSharedCoreA2aBytes)
        probed = probed || mine == b;
      expect(probed, "ranks sharing cores use a measured crossover");
    }
    if (commfuse::forced_algorithm("all_reduce").empty())
      expect(shm->two_shot_min_bytes() != 0, "ranks sharing cores time all_reduce's switch");
  } else {
    expect(!shm->shared_cores_measured(), "a core per rank: the cost models decide");
  }
}

int case_streams(commfuse::Comm& c) {
  commfuse::comm::Transport& t = c.impl().transport();
  check_crossover(t);
  // The tests run with 4 KiB slots: unit 5000 takes the staged fallback on shm.
  // {1000, 64, 0}: 64000 bytes per peer, past the CMA crossover where CMA is available (and
  // COMMFUSE_ALGO=all_to_all_stream:cma forces it for every shape with a source).
  const Shape shapes[] = {{0, 1, 0},       {1, 1, 0},     {1000, 1, 0},    {9001, 1, 100},
                          {300, 24, 0},    {70, 24, 50},  {3, 5000, 0},    {170, 64, 0},
                          {5, 3000, 6000}, {1000, 64, 0}, {1000, 64, 8192}};
  for (const Shape& sh : shapes) {
    gather(t, sh);
    all_to_all(t, sh, false);
    all_to_all(t, sh, true);
  }
  // A callback that throws on the last rank: every rank fails at once, none hangs. (On MPI
  // the peers learn it only by the deadline, mpi_stream.cpp: not exercised here.)
  const int R = c.world_size();
  if (R > 1 && std::string(c.transport_name()) == "shm") {
    commfuse::comm::GatherStream gs;
    gs.bytes = 4096;
    gs.pack = [&](uint8_t* dst, uint64_t, uint64_t n) {
      if (c.rank() == R - 1) throw std::runtime_error("pack refused on purpose");
      for (uint64_t i = 0; i < n; ++i) dst[i] = 0;
    };
    bool failed = false;
    std::string msg;
    try {
      commfuse::exec::gather_stream(t, gs);
    } catch (const std::exception& e) {
      failed = true;
      msg = e.what();
    }
    expect(failed, "a throwing pack on rank " + std::to_string(R - 1) + " did not fail rank " +
                       std::to_string(c.rank()));
    if (c.rank() != R - 1)
      expect(msg.find("pack refused on purpose") != std::string::npos ||
                 msg.find("rank " + std::to_string(R - 1)) != std::string::npos,
             "error does not name the failing rank: " + msg);
  }
  return g_stream_failures == 0 ? 0 : 1;
}

// Ranks that cut the same stream into different pieces (e.g. different comm_turn) must all
// fail naming the mismatch, not read each other's data at the wrong offsets.
int case_stream_mismatch(commfuse::Comm& c) {
  commfuse::comm::Transport& t = c.impl().transport();
  commfuse::comm::GatherStream gs;
  gs.bytes = 4000;
  gs.unit = 8;
  gs.max_piece = c.rank() == 0 ? 800 : 1600;
  gs.pack = [](uint8_t* dst, uint64_t, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = 1;
  };
  std::string msg;
  try {
    commfuse::exec::gather_stream(t, gs);
  } catch (const commfuse::Error& e) {
    msg = e.what();
    expect(e.code() == commfuse::Status::kRuntimeError, "mismatch code");
  }
  expect(msg.find("piece") != std::string::npos,
         "mismatched pieces not reported on rank " + std::to_string(c.rank()) + ": '" + msg + "'");
  return g_stream_failures == 0 ? 0 : 1;
}

// Run with testsome_shim.cpp preloaded (mpi_stream_testsome_error_w2): rank 1 arms the shim
// while packing its second piece, after the descriptor exchange, so the MPI_Testsome that
// fails is one of the stream pipeline's. Rank 1's error must name the peer of the transfer
// (rank 0); rank 0 may complete its stream or fail it naming rank 1.
int case_stream_testsome_error(commfuse::Comm& c) {
  commfuse::comm::Transport& t = c.impl().transport();
  commfuse::comm::GatherStream gs;
  gs.bytes = 64 * 1024;
  gs.unit = 8;
  gs.max_piece = 4096;
  gs.pack = [&](uint8_t* dst, uint64_t off, uint64_t n) {
    if (off > 0 && c.rank() == 1) setenv("CF_SHIM_TESTSOME_ARMED", "1", 1);
    for (uint64_t i = 0; i < n; ++i) dst[i] = 1;
  };
  gs.on_piece = [](int, const uint8_t*, uint64_t, uint64_t) {};
  std::string msg;
  try {
    commfuse::exec::gather_stream(t, gs);
  } catch (const commfuse::Error& e) {
    msg = e.what();
    std::printf("rank %d: got expected error: %s\n", c.rank(), e.what());
  }
  unsetenv("CF_SHIM_TESTSOME_ARMED");
  if (c.rank() == 1)
    expect(msg.find("MPI_Testsome on a transfer with rank 0 failed") != std::string::npos,
           "rank 1's stream error does not name rank 0: '" + msg + "'");
  else
    expect(msg.empty() || msg.find("rank 1") != std::string::npos,
           "rank 0's stream error does not name rank 1: '" + msg + "'");
  return g_stream_failures == 0 ? 0 : 1;
}
