// One rank of a multi-rank test. Started by `commfuse launch -n W` (env://) or by mpirun
// (init "mpi"), exactly as users start their programs. Each case checks its results
// bitwise against values computed locally, prints "rank R: <case> OK" and exits 0, or
// prints what went wrong and exits 1.
//
//   commfuse_rank_tests collectives | many_ops | kill_peer | exit_after_init | mismatch |
//   out_of_step |
//                       bad_arg | c_api |
//                       streams | stream_mismatch | dtype_reject | late_rank | abort_thread |
//                       abort_stream | abort_idle | stage_oom | two_threads |
//                       two_comms_threads | fork_child | slow_peer | stage_overlap |
//                       interrupt_thread | interrupt_stream | testsome_error |
//                       stream_testsome_error
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "another_comm.hpp"
#include "core/scoped_env.hpp"

using commfuse::DType;

int case_streams(commfuse::Comm& c);                 // stream_cases.cpp
int case_stream_mismatch(commfuse::Comm& c);         // stream_cases.cpp
int case_stream_testsome_error(commfuse::Comm& c);   // stream_cases.cpp
int check_move_dtypes(commfuse::Comm& c, size_t n);  // dtype_cases.cpp: failures
int case_dtype_reject(commfuse::Comm& c);            // dtype_cases.cpp

namespace {

int g_failures = 0;

#define EXPECT(cond, ...)                                                    \
  do {                                                                       \
    if (!(cond)) {                                                           \
      ++g_failures;                                                          \
      std::fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                     \
      std::fprintf(stderr, "\n");                                            \
    }                                                                        \
  } while (0)

// Small integers: exact in every float format we sum, so fp32 sums are exact too.
float value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((rank * 131 + i * 7) % 17) - 8);
}

std::vector<uint8_t> encode(const std::vector<float>& x, DType t) {
  std::vector<uint8_t> out(commfuse::dtype_storage_bytes(t, x.size()) + 1);
  commfuse::convert(x.data(), DType::kFloat32, out.data(), t, x.size(), true);
  out.resize(commfuse::dtype_storage_bytes(t, x.size()));
  return out;
}

std::vector<float> inputs(int rank, size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = value(rank, i);
  return x;
}

const DType kMoveTypes[] = {DType::kFloat32, DType::kFloat16,      DType::kBFloat16, DType::kInt8,
                            DType::kInt32,   DType::kFloat8E4M3FN, DType::kHiFloat8, DType::kInt4};
const DType kSumTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                           DType::kInt32};

void check_collectives(commfuse::Comm& c, size_t n) {
  const int R = c.world_size(), me = c.rank();
  for (DType t : kMoveTypes) {
    const char* tn = commfuse::dtype_name(t).data();
    const size_t nn = t == DType::kInt4 ? n & ~size_t{1} : n;
    // all_gather
    {
      auto src = encode(inputs(me, nn), t);
      std::vector<uint8_t> dst(src.size() * R, 0xCD);
      c.all_gather(src.data(), dst.data(), nn, t);
      for (int s = 0; s < R; ++s) {
        auto want = encode(inputs(s, nn), t);
        EXPECT(want.empty() ||
                   std::memcmp(dst.data() + s * want.size(), want.data(), want.size()) == 0,
               "all_gather %s n=%zu block %d", tn, nn, s);
      }
      // in place: the source is this rank's block of the destination
      std::vector<uint8_t> all(src.size() * R, 0xCD);
      std::copy(src.begin(), src.end(), all.begin() + me * src.size());
      c.all_gather(all.data() + me * src.size(), all.data(), nn, t);
      EXPECT(all == dst, "all_gather in place %s n=%zu", tn, nn);
    }
    // broadcast from every root
    for (int root = 0; root < R; ++root) {
      auto buf = encode(inputs(me, nn), t);
      c.broadcast(buf.data(), nn, t, root);
      EXPECT(buf == encode(inputs(root, nn), t), "broadcast %s n=%zu root %d", tn, nn, root);
    }
    // all_to_all: block s of rank q's input is inputs(q * R + s)
    {
      std::vector<uint8_t> src;
      for (int s = 0; s < R; ++s) {
        auto b = encode(inputs(me * R + s, nn), t);
        src.insert(src.end(), b.begin(), b.end());
      }
      std::vector<uint8_t> dst(src.size(), 0xCD);
      c.all_to_all(src.data(), dst.data(), nn, t);
      for (int q = 0; q < R; ++q) {
        auto want = encode(inputs(q * R + me, nn), t);
        EXPECT(want.empty() ||
                   std::memcmp(dst.data() + q * want.size(), want.data(), want.size()) == 0,
               "all_to_all %s n=%zu from %d", tn, nn, q);
      }
      c.all_to_all(src.data(), src.data(), nn, t);
      EXPECT(src == dst, "all_to_all in place %s n=%zu", tn, nn);
    }
  }
  for (DType t : kSumTypes) {
    const char* tn = commfuse::dtype_name(t).data();
    std::vector<float> sum(n, 0.0f);
    for (int s = 0; s < R; ++s)
      for (size_t i = 0; i < n; ++i) sum[i] += value(s, i);
    // all_reduce, out of place and in place
    auto src = encode(inputs(me, n), t);
    std::vector<uint8_t> dst(src.size(), 0xCD);
    c.all_reduce(src.data(), dst.data(), n, t);
    EXPECT(dst == encode(sum, t), "all_reduce %s n=%zu", tn, n);
    c.all_reduce(src.data(), src.data(), n, t);
    EXPECT(src == encode(sum, t), "all_reduce in place %s n=%zu", tn, n);
    // reduce_scatter: block s of rank q's input is inputs(q + 1000 * s)
    std::vector<uint8_t> rs_in;
    for (int s = 0; s < R; ++s) {
      auto b = encode(inputs(me + 1000 * s, n), t);
      rs_in.insert(rs_in.end(), b.begin(), b.end());
    }
    std::vector<float> rs_sum(n, 0.0f);
    for (int q = 0; q < R; ++q)
      for (size_t i = 0; i < n; ++i) rs_sum[i] += value(q + 1000 * me, i);
    std::vector<uint8_t> rs_out(commfuse::dtype_storage_bytes(t, n), 0xCD);
    c.reduce_scatter(rs_in.data(), rs_out.data(), n, t);
    EXPECT(rs_out == encode(rs_sum, t), "reduce_scatter %s n=%zu", tn, n);
  }
}

// Results must be bitwise identical on every rank: gather everyone's and compare.
void check_identical_everywhere(commfuse::Comm& c) {
  const int R = c.world_size();
  std::vector<float> x(4099);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i % 97) / (1 + c.rank());
  std::vector<float> y(x.size());
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  std::vector<float> all(x.size() * R);
  c.all_gather(y.data(), all.data(), y.size(), DType::kFloat32);
  for (int s = 1; s < R; ++s)
    EXPECT(std::memcmp(all.data(), all.data() + s * y.size(), y.size() * 4) == 0,
           "all_reduce result of rank %d differs from rank 0", s);
  // ... and equal to the rank-order sum computed here.
  for (size_t i = 0; i < x.size(); ++i) {
    float want = 0.0f;
    for (int s = 0; s < R; ++s) want += 0.1f * static_cast<float>(i % 97) / (1 + s);
    if (std::memcmp(&want, &y[i], 4) != 0) {
      EXPECT(false, "element %zu: %.9g vs rank-order sum %.9g", i, y[i], want);
      break;
    }
  }
}

// An all_reduce large enough for MPI's pipelined reduce-scatter + all-gather to run several
// pieces (1 MiB slices per rank) and, at W <= 3, two windows (32 MiB of received blocks
// each) whose last piece of 1 element leaves some ranks an empty slice; bitwise the
// rank-order sum, out of place and in place.
void check_large_all_reduce(commfuse::Comm& c) {
  const int R = c.world_size();
  const size_t n = R <= 3 ? (size_t{9} << 20) + 1 : (size_t{3} << 20) + 5;
  auto v = [](int s, size_t i) {
    return static_cast<float>((i * 7 + 3 * s) % 1013) * 0.37f / (1 + s);
  };
  std::vector<float> x(n), y(n, -1.0f);
  for (size_t i = 0; i < n; ++i) x[i] = v(c.rank(), i);
  c.all_reduce(x.data(), y.data(), n, DType::kFloat32);
  c.all_reduce(x.data(), x.data(), n, DType::kFloat32);
  for (size_t i = 0; i < n; ++i) {
    float want = 0.0f;
    for (int s = 0; s < R; ++s) want += v(s, i);
    if (std::memcmp(&want, &y[i], 4) != 0 || std::memcmp(&want, &x[i], 4) != 0) {
      EXPECT(false, "large all_reduce element %zu of %zu: %.9g / in place %.9g vs %.9g", i, n, y[i],
             x[i], want);
      break;
    }
  }
}

int case_collectives(commfuse::Comm& c) {
  c.barrier();
  // 16385: fp32 blocks just over what MPI's descriptor message carries (64 KiB less the
  // headers), fp16 under; fp32 all_reduce then takes the two-shot with its reduce-scatter
  // in the descriptor messages at W >= 2. MPI's data messages go as two eager pieces up to
  // 2 * 65408 bytes (fp32 16385, int8 70001, fp32 32704 exactly), whole above (fp32 70001);
  // fp16 32704 is exactly one piece.
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{16385}, size_t{32704},
                   size_t{70001}}) {
    check_collectives(c, n);
    g_failures += check_move_dtypes(c, n);  // uint8, int16, uint16, bool
  }
  check_identical_everywhere(c);
  check_large_all_reduce(c);
  return 0;
}

int case_many_ops(commfuse::Comm& c) {
  // Thousands of small mixed operations: flag/epoch reuse bugs show up as wrong data or hangs.
  const int R = c.world_size(), me = c.rank();
  for (int it = 0; it < 3000; ++it) {
    const size_t n = 1 + it % 37;
    switch (it % 4) {
      case 0: {
        std::vector<int32_t> x(n, me + it), y(n);
        c.all_reduce(x.data(), y.data(), n, DType::kInt32);
        const int32_t want = R * it + R * (R - 1) / 2;
        EXPECT(y[n - 1] == want, "iteration %d all_reduce %d vs %d", it, y[n - 1], want);
        break;
      }
      case 1: {
        std::vector<int32_t> x(n, me * 100000 + it), y(n * R);
        c.all_gather(x.data(), y.data(), n, DType::kInt32);
        for (int s = 0; s < R; ++s)
          EXPECT(y[s * n] == s * 100000 + it, "iteration %d all_gather block %d", it, s);
        break;
      }
      case 2: {
        int32_t v = me == it % R ? it : -1;
        c.broadcast(&v, 1, DType::kInt32, it % R);
        EXPECT(v == it, "iteration %d broadcast got %d", it, v);
        break;
      }
      default:
        c.barrier();
    }
    if (g_failures > 5) break;
  }
  return 0;
}

// Rank 1 kills itself in the middle of a sequence of all-reduces; every other rank must
// get RUNTIME_ERROR naming rank 1, well before the deadline.
int case_kill_peer(commfuse::Comm& c) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> x(1 << 16, 1.0f), y(x.size());
  try {
    for (int it = 0; it < 50; ++it) {
      if (c.rank() == 1 && it == 20) raise(SIGKILL);
      c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
    }
    EXPECT(false, "no error although rank 1 was killed");
  } catch (const commfuse::RuntimeFailure& e) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d: got expected error after %.2f s: %s\n", c.rank(), s, e.what());
    EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "error does not name rank 1: %s", e.what());
  }
  return 0;
}

// The last rank exits the moment its communicator exists; the others wait 200 ms, then call
// a barrier, which must fail saying it exited (not at COMMFUSE_TIMEOUT_S). Each rank
// had judged whether it could watch a peer's pid by whether the peer was alive at the end
// of set-up: a peer that had already returned and exited looked like one in another pid
// namespace, unwatched, and the barrier ran out the whole timeout (4 runs in 20, review).
int case_exit_after_init(commfuse::Comm& c) {
  if (c.rank() == c.world_size() - 1) {
    std::fflush(stdout);
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  try {
    c.barrier();
    EXPECT(false, "rank %d: the barrier succeeded without the last rank", c.rank());
  } catch (const commfuse::RuntimeFailure& e) {
    // Unwatched, the barrier ended at the timeout saying so instead.
    EXPECT(std::strstr(e.what(), "exited or was killed") != nullptr,
           "rank %d: '%s' does not say the peer exited", c.rank(), e.what());
  }
  return 0;
}

// Another communicator over the same ranks.
std::unique_ptr<commfuse::Comm> second_comm(commfuse::Comm& c) {
  return std::make_unique<commfuse::Comm>(c.rank(), c.world_size(),
                                          multirank::another_init_method(c));
}

// Rank 1 reaches an all_reduce after its peers gave up on it (COMMFUSE_TIMEOUT_S=1, rank 1
// 2.5 s late): the peers fail naming rank 1, and rank 1 must fail too, naming a peer,
// although every peer published its data before timing out (it finished the call and
// reported success before). Every rank then finds the communicator unusable.
int case_late_rank(commfuse::Comm& c) {
  std::vector<float> x(256, 1.0f), y(x.size());
  if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  try {
    c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
    EXPECT(false, "rank %d: the all_reduce succeeded", c.rank());
  } catch (const commfuse::RuntimeFailure& e) {
    const char* want = c.rank() == 1 ? "failed: " : "waiting for rank 1";
    EXPECT(std::strstr(e.what(), want) != nullptr, "rank %d: '%s' lacks '%s'", c.rank(), e.what(),
           want);
    std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", c.rank(), e.what());
  }
  EXPECT(!c.usable(), "rank %d: still usable", c.rank());
  return 0;
}

// abort() from another thread (a watchdog, as with ncclCommAbort) while this rank's call
// waits for a late peer: the call fails with the watchdog's reason well before the late
// rank arrives (4 s; the deadline is 60 s), and the communicator stays unusable. On shm only
// rank 0 has a watchdog and its peers fail naming it. Over MPI a call in flight cannot tell
// the peers (docs/reliability.md), so every rank but the late one has a watchdog; the late
// one's call may then complete with the data that travelled with the descriptors.
// abort_stream: the same with the call a fused all_gather_matmul in 4 pieces per rank (a
// gather stream). Over MPI the test stalls rank 1 before its second piece instead
// (COMMFUSE_FAULT=1:all_gather_matmul:1:stall), so that its peers wait inside the stream's
// pipeline (threaded at W = 2, inline polling at W = 3), past the descriptor exchange.
// interrupt_thread / interrupt_stream: the same with the host's interrupt check
// (commfuse::set_interrupt_check, as the Python package's Ctrl-C) instead of the watchdog:
// it answers "Ctrl-C test" from 300 ms on, and the waiting call fails "interrupted (Ctrl-C
// test) while waiting for ...".
std::atomic<bool> g_interrupt{false};
const char* test_interrupt_check() {
  return g_interrupt.load() ? "Ctrl-C test" : nullptr;
}

int abort_while_waiting(commfuse::Comm& c, bool stream, bool interrupt) {
  using Clock = std::chrono::steady_clock;
  std::vector<float> x(256, 1.0f), y(x.size());
  const int64_t R = c.world_size();
  std::vector<float> x1(16 * 16, 1.0f), x2(16 * 16, 1.0f), out(static_cast<size_t>(R) * 16 * 16),
      gathered(out.size());
  commfuse::AllGatherMatmulOptions options;
  options.comm_turn = 4;
  auto call = [&] {
    if (!stream) return c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
    commfuse::all_gather_matmul(
        commfuse::TensorView(x1.data(), DType::kFloat32, {16, 16}),
        commfuse::TensorView(x2.data(), DType::kFloat32, {16, 16}), c.name(), static_cast<int>(R),
        commfuse::TensorView(out.data(), DType::kFloat32, {R * 16, 16}),
        commfuse::TensorView(gathered.data(), DType::kFloat32, {R * 16, 16}), options);
  };
  const bool fault = std::getenv("COMMFUSE_FAULT") != nullptr;  // it fires in the first call
  if (!fault) call();                                           // every rank is set up
  const bool mpi = std::strcmp(c.transport_name(), "mpi") == 0;
  const bool late = c.rank() == 1;
  const bool watched = mpi ? !late : c.rank() == 0;
  const char* const reason = interrupt ? "interrupted (Ctrl-C test) while waiting" : "watchdog";
  std::thread watchdog;
  if (watched && interrupt) commfuse::set_interrupt_check(test_interrupt_check);
  if (watched)
    watchdog = std::thread([&c, interrupt] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (interrupt)
        g_interrupt.store(true);
      else
        c.abort("watchdog");
    });
  if (late && !fault) std::this_thread::sleep_for(std::chrono::seconds(4));
  const auto start = Clock::now();
  bool failed = false;
  try {
    call();
  } catch (const commfuse::RuntimeFailure& e) {
    failed = true;
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("rank %d: got expected RUNTIME_ERROR after %.2f s: %s\n", c.rank(), s, e.what());
    const char* want = watched ? reason : "rank 0";
    EXPECT(std::strstr(e.what(), want) != nullptr, "rank %d: '%s' lacks '%s'", c.rank(), e.what(),
           want);
    // The late rank arrives 3.7 s after the abort: a call that waited for it took longer.
    EXPECT(late || s < 3.0, "rank %d: the call ended %.2f s after it began", c.rank(), s);
  }
  if (watchdog.joinable()) watchdog.join();
  EXPECT(failed || (mpi && late), "rank %d: the all_reduce succeeded", c.rank());
  if (watched) {
    EXPECT(!c.usable() && c.failure().find(reason) != std::string::npos,
           "rank %d: usable %d, failure '%s'", c.rank(), c.usable(), c.failure().c_str());
    try {
      c.barrier();
      EXPECT(false, "rank %d: a call after the abort succeeded", c.rank());
    } catch (const commfuse::RuntimeFailure& e) {
      EXPECT(std::strstr(e.what(), reason) != nullptr, "rank %d: %s", c.rank(), e.what());
    }
  }
  commfuse::set_interrupt_check(nullptr);
  return 0;
}

int case_abort_thread(commfuse::Comm& c) {
  return abort_while_waiting(c, false, false);
}

int case_abort_stream(commfuse::Comm& c) {
  return abort_while_waiting(c, true, false);
}

int case_interrupt_thread(commfuse::Comm& c) {
  return abort_while_waiting(c, false, true);
}

int case_interrupt_stream(commfuse::Comm& c) {
  return abort_while_waiting(c, true, true);
}

// abort() from another thread between calls: rank 0's next call fails with its reason, and
// the peers' fails at once naming rank 0 — over MPI told by rank 0's calling thread at that
// call (MPI is SERIALIZED: the aborting thread may not send), on shm by the abort itself.
int case_abort_idle(commfuse::Comm& c) {
  using Clock = std::chrono::steady_clock;
  std::vector<float> x(256, 1.0f), y(x.size());
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  if (c.rank() == 0) std::thread([&c] { c.abort("watchdog between calls"); }).join();
  const auto start = Clock::now();
  try {
    c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
    EXPECT(false, "rank %d: the all_reduce succeeded", c.rank());
  } catch (const commfuse::RuntimeFailure& e) {
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("rank %d: got expected RUNTIME_ERROR after %.2f s: %s\n", c.rank(), s, e.what());
    const char* want = c.rank() == 0 ? "watchdog between calls" : "rank 0";
    EXPECT(std::strstr(e.what(), want) != nullptr, "rank %d: '%s' lacks '%s'", c.rank(), e.what(),
           want);
    EXPECT(s < 3.0, "rank %d: the call ended %.2f s after it began (deadline 60 s)", c.rank(), s);
  }
  EXPECT(!c.usable(), "rank %d: still usable", c.rank());
  return 0;
}

// A thread that calls barrier after `delay`, while the calling thread is in `during`: it
// must be refused.
std::thread refused_barrier(commfuse::Comm& c, std::chrono::milliseconds delay,
                            const char* during) {
  return std::thread([&c, delay, during] {
    std::this_thread::sleep_for(delay);
    try {
      c.barrier();
      EXPECT(false, "rank %d: a barrier from a second thread ran during %s", c.rank(), during);
    } catch (const commfuse::RuntimeFailure& e) {
      EXPECT(std::strstr(e.what(), "another thread is in a call") != nullptr, "rank %d: %s",
             c.rank(), e.what());
      std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", c.rank(), e.what());
    }
  });
}

// A thread that plans a call with a bad argument after `delay`, while the calling thread is
// in `during`: the error is its own, and nothing reaches the peers (its rejection took the
// place of the operator's next collective, failing the operator on every rank).
std::thread refused_bad_plan(commfuse::Comm& c, std::chrono::milliseconds delay,
                             const char* during) {
  return std::thread([&c, delay, during] {
    std::this_thread::sleep_for(delay);
    std::vector<float> a(8), b(8), o(4);
    try {
      commfuse::MatmulAllReducePlan bad(commfuse::TensorView(a.data(), DType::kFloat32, {2, 4}),
                                        commfuse::TensorView(b.data(), DType::kFloat32, {3, 2}),
                                        c.name(),
                                        commfuse::TensorView(o.data(), DType::kFloat32, {2, 2}));
      EXPECT(false, "rank %d: a plan with x2 of 3 rows for k = 4 was accepted during %s", c.rank(),
             during);
    } catch (const commfuse::InvalidArgument& e) {
      std::printf("rank %d: got expected PARAM_INVALID: %s\n", c.rank(), e.what());
    }
  });
}

// MPI at MPI_THREAD_SERIALIZED (as commfuse initializes it): rank 0's second thread calls on a
// second MPI communicator while its first thread is in a call on the first (waiting for a
// late rank 1). Two threads in MPI at once would be undefined behaviour: the second is
// refused, naming the thread level; the first call completes, and both communicators stay
// usable (the refused call was never counted).
int case_two_comms_threads(commfuse::Comm& c) {
  auto c2 = second_comm(c);
  std::vector<float> x(256, 1.0f), y(x.size());
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::thread second;
  if (c.rank() == 0)
    second = std::thread([&c2] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      try {
        c2->barrier();
        EXPECT(false, "rank 0: a barrier on the second communicator ran during an all_reduce");
      } catch (const commfuse::RuntimeFailure& e) {
        EXPECT(std::strstr(e.what(), "MPI_THREAD_MULTIPLE") != nullptr, "rank 0: %s", e.what());
        std::printf("rank 0: got expected RUNTIME_ERROR: %s\n", e.what());
      }
    });
  std::fill(y.begin(), y.end(), 0.0f);
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  if (second.joinable()) second.join();
  EXPECT(y[0] == static_cast<float>(c.world_size()), "rank %d: sum %g", c.rank(), y[0]);
  c2->barrier();
  EXPECT(c.usable() && c2->usable(), "rank %d: unusable: %s / %s", c.rank(), c.failure().c_str(),
         c2->failure().c_str());
  return 0;
}

// Rank 0 destroys a communicator (the second one, c2) while a thread of its own is in a call
// on it waiting for a late rank 1, without abort() first: that call fails naming the destroy
// and the destroy waits for it to leave (it used to free the transport under the call:
// SIGSEGV). `op`: the call is an operator (matmul_all_reduce, found by the group's name).
// Rank 1's calls on c2 then fail at once naming rank 0; c stays usable on every rank.
int destroy_in_flight(commfuse::Comm& c, bool op) {
  auto c2 = second_comm(c);
  commfuse::Comm* const comm2 = c2.get();  // the worker's: c2 itself is reset on this thread
  const std::string name = c2->name();
  std::vector<float> x(64, 1.0f), y(x.size()), w(64 * 64, 0.0f), out(64);
  auto call = [&] {
    if (op)
      matmul_all_reduce(commfuse::TensorView(x.data(), DType::kFloat32, {1, 64}),
                        commfuse::TensorView(w.data(), DType::kFloat32, {64, 64}), name,
                        commfuse::TensorView(out.data(), DType::kFloat32, {1, 64}));
    else
      comm2->all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  };
  if (c.rank() == 0) {
    std::string error;
    std::atomic<bool> calling{false};
    std::thread worker([&] {
      try {
        calling.store(true);
        call();
        error = "(returned)";
      } catch (const commfuse::Error& e) {
        error = e.what();
      }
    });
    // Until the worker is about to call, then long enough for it to be waiting in the call
    // (rank 1 stays away from c2 until rank 0's destroy: nothing else can end that wait).
    while (!calling.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    c2.reset();
    worker.join();
    std::printf("rank 0: the call in flight got: %s\n", error.c_str());
    EXPECT(error.find("rank 0 destroyed the communicator while another thread was in a call on "
                      "it") != std::string::npos,
           "rank 0: the call in flight got '%s'", error.c_str());
  } else {
    c.barrier();  // after rank 0's destroy
    try {
      call();
      EXPECT(false, "rank %d: a call on the communicator rank 0 destroyed succeeded", c.rank());
    } catch (const commfuse::RuntimeFailure& e) {
      std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", c.rank(), e.what());
      EXPECT(std::strstr(e.what(), "rank 0 destroyed the communicator") != nullptr,
             "rank %d: '%s' does not name rank 0's destroy", c.rank(), e.what());
    }
  }
  if (c.rank() == 0) c.barrier();
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  EXPECT(y[0] == static_cast<float>(c.world_size()), "rank %d: sum %g", c.rank(), y[0]);
  return 0;
}

int case_destroy_in_flight(commfuse::Comm& c) {
  return destroy_in_flight(c, false);
}

int case_destroy_in_flight_op(commfuse::Comm& c) {
  return destroy_in_flight(c, true);
}

// Rank 0 destroys a communicator between calls and stays: its peers' next calls on it fail
// at once naming the destroy (they waited until COMMFUSE_TIMEOUT_S, and the message said
// "timed out"). The call rank 0 finished last is not disturbed for peers still in it: a
// broadcast from rank 0 that rank 0 leaves (and destroys) before the last rank even enters.
int case_peer_destroyed(commfuse::Comm& c) {
  auto c2 = second_comm(c);
  std::vector<float> x(256, 1.0f), y(x.size());
  c2->all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  EXPECT(y[0] == static_cast<float>(c.world_size()), "rank %d: sum %g", c.rank(), y[0]);
  std::vector<float> b(256, c.rank() == 0 ? 7.0f : 0.0f);
  if (c.rank() == c.world_size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c2->broadcast(b.data(), b.size(), DType::kFloat32, 0);
  EXPECT(b[0] == 7.0f && b[255] == 7.0f, "rank %d: broadcast gave %g", c.rank(), b[0]);
  if (c.rank() == 0) {
    c2.reset();
  } else {
    try {
      c2->all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
      EXPECT(false, "rank %d: an all_reduce without rank 0 succeeded", c.rank());
    } catch (const commfuse::RuntimeFailure& e) {
      std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", c.rank(), e.what());
      EXPECT(std::strstr(e.what(), "rank 0 destroyed the communicator") != nullptr,
             "rank %d: '%s' does not name rank 0's destroy", c.rank(), e.what());
    }
  }
  c.barrier();
  return 0;
}

// A second thread calling into a communicator while the first is in a call (which waits for
// a late rank 1) is refused with RUNTIME_ERROR on that thread alone; the first call and the
// communicator are unaffected.
int case_two_threads(commfuse::Comm& c) {
  std::vector<float> x(256, 1.0f), y(x.size());
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::thread second;
  if (c.rank() == 0) second = refused_barrier(c, std::chrono::milliseconds(200), "an all_reduce");
  std::fill(y.begin(), y.end(), 0.0f);
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  if (second.joinable()) second.join();
  EXPECT(y[0] == static_cast<float>(c.world_size()) && y[255] == y[0], "rank %d: sum %g", c.rank(),
         y[0]);
  EXPECT(c.usable(), "rank %d: unusable: %s", c.rank(), c.failure().c_str());
  c.barrier();
  // The same during an operator, whose GEMM (a few hundred ms here) runs between its
  // collectives, where no collective is in flight: still refused, the operator unaffected.
  // Planned first, so that the second thread starts while execute runs.
  const int64_t R = c.world_size(), m = 1024, k = 2048, n = 2048;
  std::vector<float> x1(static_cast<size_t>(m * k), 1.0f), x2(static_cast<size_t>(k * n), 1.0f),
      out(static_cast<size_t>(R * m * n)), gathered(static_cast<size_t>(R * m * k));
  commfuse::AllGatherMatmulPlan plan(
      commfuse::TensorView(x1.data(), DType::kFloat32, {m, k}),
      commfuse::TensorView(x2.data(), DType::kFloat32, {k, n}), c.name(), static_cast<int>(R),
      commfuse::TensorView(out.data(), DType::kFloat32, {R * m, n}),
      commfuse::TensorView(gathered.data(), DType::kFloat32, {R * m, k}));
  std::vector<uint8_t> workspace(plan.workspace_size());
  // The second thread's barrier, then a bad plan of its own (refused there, nothing told to
  // the peers), each while the operator runs.
  for (const auto& meanwhile : {refused_barrier, refused_bad_plan}) {
    std::fill(out.begin(), out.end(), 0.0f);
    if (c.rank() == 0) second = meanwhile(c, std::chrono::milliseconds(30), "all_gather_matmul");
    plan.execute(workspace.data(), workspace.size());
    if (second.joinable()) second.join();
    EXPECT(out[0] == static_cast<float>(k) && out.back() == out[0], "rank %d: output %g", c.rank(),
           out[0]);
    EXPECT(c.usable(), "rank %d: unusable: %s", c.rank(), c.failure().c_str());
    c.barrier();
  }
  return 0;
}

int case_stage_overlap(commfuse::Comm& c);

// An in-place CMA all_to_all / all_gather on rank 1 whose private copy of the source (the
// peers read it while rank 1 writes its destination) cannot be allocated: 2^48 bytes, more
// than the address space. Rank 1 fails with "out of memory", its peers fail naming it, and
// the communicator stays usable. The buffers are addresses only: a refused call reads and
// writes nothing (a touch would crash). Run with COMMFUSE_ALGO forcing CMA for both.
int case_stage_oom(commfuse::Comm& c) {
  const int R = c.world_size();
  const bool oom = c.rank() == 1;
  const uint64_t bytes = uint64_t{1} << 48;
  auto at = [](uint64_t address) { return reinterpret_cast<void*>(uintptr_t{4096} + address); };
  for (const bool gather : {false, true}) {
    const char* op = gather ? "all_gather" : "all_to_all";
    try {
      // Rank 1's source and destination overlap (not as all_gather's own block), the others'
      // do not.
      if (gather)
        c.all_gather(oom ? at(1) : at(0), oom ? at(0) : at(bytes), bytes, DType::kInt8);
      else
        c.all_to_all(at(0), oom ? at(0) : at(2 * bytes), bytes / static_cast<uint64_t>(R) + 1,
                     DType::kInt8);
      EXPECT(false, "rank %d: %s succeeded", c.rank(), op);
    } catch (const commfuse::RuntimeFailure& e) {
      const char* want = oom ? "out of memory allocating" : "rank 1 rejected the call";
      EXPECT(std::strstr(e.what(), want) != nullptr, "rank %d: '%s' lacks '%s'", c.rank(), e.what(),
             want);
      std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", c.rank(), e.what());
    }
    EXPECT(c.usable(), "rank %d: unusable after %s: %s", c.rank(), op, c.failure().c_str());
  }
  return case_stage_overlap(c);
}

// In-place and overlapping sources of the copying collectives, on whichever path the test
// forces (stage_oom's impossible buffers are for the paths that stage before any copy).
int case_stage_overlap(commfuse::Comm& c) {
  const int R = c.world_size();
  // The next in-place call stages and works.
  std::vector<int32_t> x(static_cast<size_t>(R) * 1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = c.rank() * 100000 + static_cast<int32_t>(i);
  c.all_to_all(x.data(), x.data(), 1024, DType::kInt32);
  for (int q = 0; q < R; ++q)
    EXPECT(x[q * 1024 + 5] == q * 100000 + c.rank() * 1024 + 5, "rank %d: block %d: %d", c.rank(),
           q, x[q * 1024 + 5]);
  // all_gather whose source is a peer's block of the output (rank 1's: block 0), 4 MiB: over
  // MPI block 0 arrived over the source while it was still being sent (rank 0 got its own
  // values back as rank 1's); now sent from a copy.
  const size_t n = size_t{1} << 20;
  std::vector<float> g(static_cast<size_t>(R) * n, -1.0f), own(n, 100.0f + c.rank());
  if (c.rank() == 1) std::fill(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(n), 101.0f);
  c.all_gather(c.rank() == 1 ? g.data() : own.data(), g.data(), n, DType::kFloat32);
  for (int q = 0; q < R; ++q)
    EXPECT(g[q * n] == 100.0f + q && g[q * n + n - 1] == 100.0f + q,
           "rank %d: all_gather block %d: %g ... %g", c.rank(), q, g[q * n], g[q * n + n - 1]);
  // A source that starts before dst and runs into it: a forward copy over itself would write
  // its first elements again where its later ones were still to be read (at W = 1 the whole
  // call is that one copy).
  std::vector<float> f(static_cast<size_t>(R) * n + 500);
  for (size_t i = 0; i < n; ++i)
    f[i] = static_cast<float>(c.rank() * 1000000 + static_cast<int>(i));
  c.all_gather(f.data(), f.data() + 500, n, DType::kFloat32);
  for (int q = 0; q < R; ++q)
    for (const size_t i : {size_t{0}, size_t{499}, size_t{500}, n / 2, n - 1})
      EXPECT(f[500 + q * n + i] == static_cast<float>(q * 1000000 + static_cast<int>(i)),
             "rank %d: all_gather from before dst, block %d [%zu]: %g", c.rank(), q, i,
             f[500 + q * n + i]);
  // Sources inside dst at no block boundary, each block 12 MiB (several 4 MiB slot steps):
  // shm's slot steps wrote arriving blocks over source bytes they had still to read (all of a
  // W = 3 all_gather's 8 MiB blocks wrong); now staged on every path.
  const size_t big = size_t{3} << 20;
  std::vector<float> h(static_cast<size_t>(R + 1) * big + 1000);
  float* src = h.data() + static_cast<size_t>((c.rank() + 1) % R) * big + 1000;
  std::fill(src, src + big, 200.0f + c.rank());
  c.all_gather(src, h.data(), big, DType::kFloat32);
  for (int q = 0; q < R; ++q)
    for (const size_t i : {size_t{0}, size_t{1000}, big / 2, big - 1})
      EXPECT(h[q * big + i] == 200.0f + q, "rank %d: overlapping all_gather block %d [%zu]: %g",
             c.rank(), q, i, h[q * big + i]);
  std::vector<int32_t> a(static_cast<size_t>(R + 1) * big);
  int32_t* a_src = a.data() + 1000;  // dst is a.data()
  for (int q = 0; q < R; ++q)
    std::fill(a_src + q * big, a_src + (q + 1) * big, c.rank() * 1000 + q);
  c.all_to_all(a_src, a.data(), big, DType::kInt32);
  for (int q = 0; q < R; ++q)
    for (const size_t i : {size_t{0}, big / 2, big - 1})
      EXPECT(a[q * big + i] == q * 1000 + c.rank(),
             "rank %d: overlapping all_to_all block %d [%zu]: %d", c.rank(), q, i, a[q * big + i]);
  return 0;
}

// Rank 0 arrives 300 ms late at each of three all_reduces: its peers wait past their spin
// phase, where they look whether rank 0's process lives. run_pid_namespace.sh runs it with
// rank 1 in a pid namespace of its own, where neither can see the other's pid: not a death
// (each wait failed "rank 0 (pid ...) exited or was killed").
// Three all_reduces of rank + 1 (rank 0 late_ms late at each) give their sum, and the
// communicator stays usable; `when` names the moment in the messages.
void expect_three_sums(commfuse::Comm& c, int late_ms, const char* when) {
  for (int i = 0; i < 3; ++i) {
    if (c.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    std::vector<float> x(1024, static_cast<float>(c.rank() + 1)), y(x.size());
    c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
    const float want = static_cast<float>(c.world_size() * (c.world_size() + 1) / 2);
    EXPECT(y[0] == want && y[1023] == want, "rank %d: all_reduce %d %s: %g", c.rank(), i, when,
           y[0]);
  }
  EXPECT(c.usable(), "rank %d: unusable %s: %s", c.rank(), when, c.failure().c_str());
}

int case_slow_peer(commfuse::Comm& c) {
  expect_three_sums(c, 300, "with rank 0 late");
  return 0;
}

// fork(): the child of rank 0 calls on its parent's communicator (a barrier, an all_reduce,
// abort): each is PARAM_INVALID in the child, nothing reaches the peers, and the parent's
// group goes on. Before, the child's barrier was taken as rank 0's step: rank 0's next
// all_reduce "succeeded" with rank 1's leftovers while rank 1's failed.
int case_fork_child(commfuse::Comm& c) {
  c.barrier();
  if (c.rank() == 0) {
    const pid_t child = fork();
    if (child == 0) {
      int refused = 0;
      std::vector<float> x(64, 1.0f), y(x.size());
      const std::function<void()> calls[] = {
          [&] { c.barrier(); },
          [&] { c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32); },
          [&] { c.abort("from the child"); }};
      for (const auto& call : calls) {
        try {
          call();
        } catch (const commfuse::InvalidArgument& e) {
          refused += std::strstr(e.what(), "fork() child") != nullptr;
          std::printf("child of rank 0: got expected PARAM_INVALID: %s\n", e.what());
        } catch (const commfuse::Error& e) {
          std::printf("child of rank 0: FAILED: %s\n", e.what());
        }
      }
      std::fflush(stdout);
      _exit(refused == 3 ? 0 : 1);
    }
    int status = 0;
    EXPECT(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
               WEXITSTATUS(status) == 0,
           "rank 0: the forked child's calls were not all refused (status %d)", status);
  }
  expect_three_sums(c, 0, "after the fork");
  return 0;
}

// Calls that fail at the descriptor check with blocks too large for a descriptor message:
// over MPI those go right after it, before the check (EarlySend, mpi_transport.hpp), so the
// failed call left them on the wire. Rank 1 disagrees each time (a count, a rejected
// argument); every rank must fail the call, stay usable, and then get
// the right blocks from a matching all_to_all and all_gather, not the failed call's.
// Blocks of n float32: 64 KiB go as two eager messages (left undrained, the next call
// received them), 256 KiB by rendezvous (left undrained, the failed call's sends hung).
void expect_large_mismatches_recovered(commfuse::Comm& c, size_t n) {
  const int R = c.world_size();
  const bool odd = c.rank() == 1;
  std::vector<float> src(static_cast<size_t>(R) * (n + 64), -1.0f), dst(src.size());
  const std::pair<const char*, std::function<void()>> calls[] = {
      {"all_gather of another count",
       [&] { c.all_gather(src.data(), dst.data(), odd ? n + 64 : n, DType::kFloat32); }},
      {"all_to_all with a null source on rank 1",
       [&] { c.all_to_all(odd ? nullptr : src.data(), dst.data(), n, DType::kFloat32); }},
  };
  for (const auto& [what, call] : calls) {
    try {
      call();
      EXPECT(false, "rank %d: %s: no error", c.rank(), what);
    } catch (const commfuse::RuntimeFailure& e) {
      EXPECT(
          std::strstr(e.what(), "rank 1") != nullptr || std::strstr(e.what(), "rank 0") != nullptr,
          "rank %d: %s: names no rank: %s", c.rank(), what, e.what());
    } catch (const commfuse::Error& e) {  // rank 1's own rejection
      EXPECT(odd, "rank %d: %s: %s", c.rank(), what, e.what());
    }
    EXPECT(c.usable(), "rank %d: unusable after %s: %s", c.rank(), what, c.failure().c_str());
    for (int q = 0; q < R; ++q)
      std::fill_n(src.begin() + static_cast<std::ptrdiff_t>(q * n), n,
                  static_cast<float>(c.rank() * 100 + q));
    c.all_to_all(src.data(), dst.data(), n, DType::kFloat32);
    for (int q = 0; q < R; ++q)
      EXPECT(dst[q * n] == q * 100 + c.rank() && dst[q * n + n - 1] == dst[q * n],
             "rank %d: after %s, all_to_all block %d: %g ... %g", c.rank(), what, q, dst[q * n],
             dst[q * n + n - 1]);
    c.all_gather(src.data(), dst.data(), n, DType::kFloat32);
    for (int q = 0; q < R; ++q)
      EXPECT(dst[q * n] == q * 100 && dst[q * n + n - 1] == q * 100,
             "rank %d: after %s, all_gather block %d: %g ... %g", c.rank(), what, q, dst[q * n],
             dst[q * n + n - 1]);
  }
}

// On `t` (W >= 3), rank 1 aborts, rank 0 rejects its all_to_all (a null source), and the
// other ranks make it with 256 KiB blocks, which over MPI go by rendezvous right after the
// descriptor: every rank learns that rank 1 failed, and none waits on the others' early
// blocks. Those ranks then stay out of MPI for 4 s, past t's 2 s deadline: rank 0 had
// drained their blocks, so its rejection timed out and its communicator reported that
// instead of rank 1's failure. The processes must also exit with those sends unmatched.
void expect_reject_beside_failed_peer(commfuse::Comm& c, commfuse::Comm& t) {
  if (c.world_size() < 3) return;
  const size_t n = 65536;
  std::vector<float> src(static_cast<size_t>(c.world_size()) * n, 1.0f), dst(src.size());
  if (c.rank() == 1) {
    t.abort("rank 1 stops");
    EXPECT(!t.usable(), "rank 1: usable after abort");
    return;
  }
  try {
    t.all_to_all(c.rank() == 0 ? nullptr : src.data(), dst.data(), n, DType::kFloat32);
    EXPECT(false, "rank %d: all_to_all beside a failed rank 1 succeeded", c.rank());
  } catch (const commfuse::NullPointerError& e) {
    EXPECT(c.rank() == 0, "rank %d: %s", c.rank(), e.what());
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT(c.rank() != 0, "rank 0: %s", e.what());
    EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "rank %d: names not rank 1: %s", c.rank(),
           e.what());
  }
  if (c.rank() >= 2) std::this_thread::sleep_for(std::chrono::seconds(4));
  // Told before the next call (over MPI by the descriptors the rejection exchanged; on
  // shm at its next synchronization at the latest).
  try {
    t.barrier();
    EXPECT(false, "rank %d: a barrier beside a failed rank 1 succeeded", c.rank());
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT(
        std::strstr(e.what(), "rank 1") != nullptr && std::strstr(e.what(), "timed out") == nullptr,
        "rank %d: %s", c.rank(), e.what());
  }
  EXPECT(!t.usable(), "rank %d: usable beside a failed rank 1", c.rank());
}

// Run with testsome_shim.cpp preloaded (mpi_testsome_error_w2): rank 1's MPI_Testsome fails
// once, in the descriptor exchange of this all_gather. Rank 1's error must name the peer of
// the transfer MPI failed (rank 0) and MPI's message; the communicator is then unusable.
// Rank 0 may complete its call or fail it naming rank 1, by its deadline either way.
int case_testsome_error(commfuse::Comm& c) {
  std::vector<float> x(16, static_cast<float>(c.rank())), y(16 * c.world_size());
  try {
    const commfuse::detail::ScopedEnv armed("CF_SHIM_TESTSOME_ARMED", "1");
    c.all_gather(x.data(), y.data(), x.size(), DType::kFloat32);
    EXPECT(c.rank() != 1, "rank 1: no error from the failed MPI_Testsome");
  } catch (const commfuse::RuntimeFailure& e) {
    std::printf("rank %d: got expected error: %s\n", c.rank(), e.what());
    if (c.rank() == 1)
      EXPECT(std::strstr(e.what(), "MPI_Testsome on a transfer with rank 0 failed") != nullptr,
             "rank 1's error does not name rank 0: %s", e.what());
    else
      EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "rank 0's error does not name rank 1: %s",
             e.what());
  }
  if (c.rank() == 1) EXPECT(!c.usable(), "rank 1 still usable after an MPI error");
  return 0;
}

// Rank 1 calls all_reduce with a different count, then (new comm) with a different dtype.
int case_mismatch(commfuse::Comm& c) {
  std::vector<float> x(1024, 1.0f), y(x.size());
  const size_t n = c.rank() == 1 ? 512 : 1024;
  try {
    c.all_reduce(x.data(), y.data(), n, DType::kFloat32);
    EXPECT(false, "no error for mismatched counts");
  } catch (const commfuse::RuntimeFailure& e) {
    std::printf("rank %d: got expected error: %s\n", c.rank(), e.what());
    EXPECT(
        std::strstr(e.what(), "mismatch") != nullptr || std::strstr(e.what(), "rank 1") != nullptr,
        "error does not explain: %s", e.what());
  }
  // Every rank failed the call at its first synchronization, before any data moved: the
  // communicator stays usable and the next call (with matching arguments) works.
  EXPECT(c.usable(), "unusable after a mismatch: %s", c.failure().c_str());
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  EXPECT(y[0] == static_cast<float>(c.world_size()) && y[1023] == y[0], "sum after mismatch %g",
         y[0]);
  // Rank 1's data too large to travel with its descriptor (MPI), the others' small.
  std::vector<float> big(32768, 1.0f), big_out(big.size());
  try {
    c.all_reduce(big.data(), big_out.data(), c.rank() == 1 ? big.size() : 1024, DType::kFloat32);
    EXPECT(false, "no error for mismatched counts 32768 / 1024");
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT(std::strstr(e.what(), "32768") != nullptr && std::strstr(e.what(), "1024") != nullptr,
           "error does not name both counts: %s", e.what());
  }
  EXPECT(c.usable(), "unusable after a mismatch: %s", c.failure().c_str());
  c.all_reduce(big.data(), big_out.data(), big.size(), DType::kFloat32);
  EXPECT(big_out[0] == static_cast<float>(c.world_size()) && big_out.back() == big_out[0],
         "sum after mismatch %g", big_out[0]);
  for (const size_t n : {size_t{16384}, size_t{65536}}) expect_large_mismatches_recovered(c, n);
  // A fresh communicator, and this time rank 1 disagrees on the dtype.
  auto fresh = second_comm(c);
  // Its waits give up after 2 s (the transport reads COMMFUSE_TIMEOUT_S when it is made).
  auto third = [&] {
    const commfuse::detail::ScopedEnv timeout("COMMFUSE_TIMEOUT_S", "2");
    return second_comm(c);
  }();
  expect_reject_beside_failed_peer(c, *third);
  try {
    fresh->all_gather(x.data(), y.data(), 64, c.rank() == 1 ? DType::kInt32 : DType::kFloat32);
    EXPECT(false, "no error for mismatched dtypes");
  } catch (const commfuse::RuntimeFailure& e) {
    std::printf("rank %d: got expected error: %s\n", c.rank(), e.what());
    EXPECT(std::strstr(e.what(), "int32") != nullptr && std::strstr(e.what(), "float32") != nullptr,
           "error does not name both dtypes: %s", e.what());
  }
  // abort() (ncclCommAbort): this rank's communicator refuses every later call, and a peer
  // waiting for it fails at once naming it instead of waiting for the deadline.
  if (c.rank() == 1) {
    fresh->abort("test");
    EXPECT(!fresh->usable(), "usable after abort");
  }
  try {
    fresh->barrier();
    EXPECT(false, "barrier on an aborted communicator did not fail");
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "does not name rank 1: %s", e.what());
  }
  EXPECT(!fresh->usable(), "usable after a failed barrier");
  return 0;
}

// One rank calls another operator than its peers at the same call (one call too many, or
// one skipped): every rank fails that call naming both operators, and the communicator
// becomes unusable. Were it left usable, after an extra barrier on rank 0 the next
// all_reduce would pair rank 0's call i with the peers' call i + 1 and succeed with a wrong
// sum; the call numbers still agree, so only the operators tell. Each case on a fresh
// communicator; the large ones with blocks that MPI sends right after the descriptors
// (EarlySend: 64 KiB blocks as two eager messages, 256 KiB by rendezvous), which the
// processes must still exit with, unmatched.
int case_out_of_step(commfuse::Comm& c) {
  using Clock = std::chrono::steady_clock;
  const bool odd = c.rank() == 1;
  const size_t big = 65536, mid = 16384;
  std::vector<float> src(static_cast<size_t>(c.world_size()) * big, 1.0f), dst(src.size());
  const std::pair<const char*, std::function<void(commfuse::Comm&)>> cases[] = {
      {"a barrier against an all_reduce",
       [&](commfuse::Comm& t) {
         if (odd)
           t.barrier();
         else
           t.all_reduce(src.data(), dst.data(), 256, DType::kFloat32);
       }},
      {"an all_to_all of 256 KiB blocks against an all_gather",
       [&](commfuse::Comm& t) {
         if (odd)
           t.all_to_all(src.data(), dst.data(), big, DType::kFloat32);
         else
           t.all_gather(src.data(), dst.data(), big, DType::kFloat32);
       }},
      {"a barrier against an all_to_all of 64 KiB blocks",
       [&](commfuse::Comm& t) {
         if (odd)
           t.barrier();
         else
           t.all_to_all(src.data(), dst.data(), mid, DType::kFloat32);
       }},
      // W >= 3: ranks 0 and 1 also disagree on the count, which each met first (CallFailed,
      // usable) while rank 2 met the barrier against rank 0 (fatal): the verdict must not
      // depend on the order a rank reads its peers in.
      {"all_reduce counts 16384 / 65536 (256 KiB by rendezvous) against a barrier on rank 2",
       [&](commfuse::Comm& t) {
         if (c.rank() == 2)
           t.barrier();
         else
           t.all_reduce(src.data(), dst.data(), odd ? big : mid, DType::kFloat32);
       }},
  };
  for (const auto& [what, call] : cases) {
    if (std::strstr(what, "rank 2") != nullptr && c.world_size() < 3) continue;
    auto fresh = second_comm(c);
    fresh->all_reduce(src.data(), dst.data(), 256, DType::kFloat32);
    try {
      call(*fresh);
      EXPECT(false, "rank %d: %s: no error", c.rank(), what);
    } catch (const commfuse::RuntimeFailure& e) {
      std::printf("rank %d: %s: got expected RUNTIME_ERROR: %s\n", c.rank(), what, e.what());
      EXPECT(std::strstr(e.what(), " called ") != nullptr,
             "rank %d: %s: '%s' does not name the operators", c.rank(), what, e.what());
      EXPECT(std::strstr(e.what(), "out of step") != nullptr,
             "rank %d: %s: '%s' does not say the calls went out of step", c.rank(), what, e.what());
    }
    EXPECT(!fresh->usable(), "rank %d: still usable after %s", c.rank(), what);
    const auto start = Clock::now();
    try {
      fresh->all_reduce(src.data(), dst.data(), 256, DType::kFloat32);
      EXPECT(false, "rank %d: an all_reduce after %s succeeded (sum %g)", c.rank(), what, dst[0]);
    } catch (const commfuse::RuntimeFailure& e) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT(s < 3.0, "rank %d: the refused call took %.2f s", c.rank(), s);
    }
  }
  // W >= 3: rank 0 rejects its arguments (a null src) in an all_gather that rank 1 makes too,
  // while rank 2 calls barrier. Ranks 1 and 2 still find the calls out of step (they took
  // rank 0's rejection for the verdict: usable, and the next calls ran paired one off); rank
  // 0 gets its own error, and its next call fails (its peers' communicators are unusable).
  if (c.world_size() >= 3) {
    auto fresh = second_comm(c);
    fresh->all_reduce(src.data(), dst.data(), 256, DType::kFloat32);
    try {
      if (c.rank() == 2)
        fresh->barrier();
      else
        fresh->all_gather(c.rank() == 0 ? nullptr : src.data(), dst.data(), 256, DType::kFloat32);
      EXPECT(false, "rank %d: the rejected out-of-step call succeeded", c.rank());
    } catch (const commfuse::NullPointerError& e) {
      EXPECT(c.rank() == 0, "rank %d: PARAM_NULLPTR: %s", c.rank(), e.what());
    } catch (const commfuse::RuntimeFailure& e) {
      std::printf("rank %d: a rejection within out-of-step calls: got expected RUNTIME_ERROR: %s\n",
                  c.rank(), e.what());
      EXPECT(c.rank() != 0 && std::strstr(e.what(), "out of step") != nullptr,
             "rank %d: '%s' does not say the calls went out of step", c.rank(), e.what());
      EXPECT(!fresh->usable(), "rank %d: still usable after calls out of step", c.rank());
    }
    try {
      fresh->all_reduce(src.data(), dst.data(), 256, DType::kFloat32);
      EXPECT(false, "rank %d: an all_reduce after calls out of step succeeded (sum %g)", c.rank(),
             dst[0]);
    } catch (const commfuse::RuntimeFailure&) {
    }
  }
  // The group's first communicator is untouched.
  c.all_reduce(src.data(), dst.data(), 256, DType::kFloat32);
  EXPECT(dst[0] == static_cast<float>(c.world_size()), "rank %d: sum %g on the first communicator",
         c.rank(), dst[0]);
  return 0;
}

// Rank 1 passes a null buffer: it gets PARAM_NULLPTR, the others RUNTIME_ERROR naming it.
int case_bad_arg(commfuse::Comm& c) {
  std::vector<float> x(256, 1.0f), y(x.size());
  try {
    c.all_reduce(c.rank() == 1 ? nullptr : x.data(), y.data(), x.size(), DType::kFloat32);
    EXPECT(false, "no error");
  } catch (const commfuse::NullPointerError& e) {
    EXPECT(c.rank() == 1, "rank %d got PARAM_NULLPTR: %s", c.rank(), e.what());
    std::printf("rank %d: got expected PARAM_NULLPTR: %s\n", c.rank(), e.what());
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT(c.rank() != 1, "rank 1 got RUNTIME_ERROR: %s", e.what());
    EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "does not name rank 1: %s", e.what());
    std::printf("rank %d: got expected RUNTIME_ERROR: %s\n", c.rank(), e.what());
  }
  // A count whose byte size does not fit a buffer (2^62 float32: 2^64 bytes, which wrapped to
  // 0 before), on rank 1 only: PARAM_INVALID there naming the count, RUNTIME_ERROR naming rank
  // 1 on its peers. 2^60 float32 fits one buffer (2^62 bytes) but not R >= 2 blocks of it:
  // the collectives with R blocks reject it; all_reduce and broadcast take it as a count and
  // would read that many bytes (past this test's buffers), so they are not asked. Every
  // collective still works afterwards.
  const size_t n = x.size() / static_cast<size_t>(c.world_size());
  for (const size_t huge : {size_t{1} << 62, size_t{1} << 60}) {
    const size_t count = c.rank() == 1 ? huge : n;
    const std::string too_large = "(rank 1): count " + std::to_string(huge) + " is too large";
    const std::pair<const char*, std::function<void()>> calls[] = {
        {"all_reduce", [&] { c.all_reduce(x.data(), y.data(), count, DType::kFloat32); }},
        {"broadcast", [&] { c.broadcast(y.data(), count, DType::kFloat32, 0); }},
        {"all_gather", [&] { c.all_gather(x.data(), y.data(), count, DType::kFloat32); }},
        {"reduce_scatter", [&] { c.reduce_scatter(x.data(), y.data(), count, DType::kFloat32); }},
        {"all_to_all", [&] { c.all_to_all(x.data(), y.data(), count, DType::kFloat32); }},
    };
    for (const auto& [op, call] : calls) {
      const bool one_block =
          std::strcmp(op, "all_reduce") == 0 || std::strcmp(op, "broadcast") == 0;
      if (one_block && huge < (size_t{1} << 62)) continue;
      try {
        call();
        EXPECT(c.world_size() == 1, "%s of count %zu on rank 1: no error", op, huge);
      } catch (const commfuse::InvalidArgument& e) {
        EXPECT(c.rank() == 1, "rank %d got PARAM_INVALID: %s", c.rank(), e.what());
        EXPECT(std::strstr(e.what(), too_large.c_str()) != nullptr, "%s: %s", op, e.what());
      } catch (const commfuse::RuntimeFailure& e) {
        EXPECT(c.rank() != 1, "rank 1 got RUNTIME_ERROR: %s", e.what());
        EXPECT(std::strstr(e.what(), "rank 1") != nullptr, "does not name rank 1: %s", e.what());
      }
      std::fill(y.begin(), y.end(), 0.0f);
      c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
      EXPECT(y[0] == static_cast<float>(c.world_size()), "%s: the next all_reduce gave %g", op,
             y[0]);
    }
  }
  // A reducing call whose dst overlaps src without being it, on rank 1: PARAM_INVALID there,
  // RUNTIME_ERROR naming rank 1 on its peers (the sums came out wrong, on shm and MPI).
  std::vector<float> z(2 * x.size(), 1.0f);
  const size_t half = x.size() / 2, per = x.size() / static_cast<size_t>(c.world_size());
  const std::pair<const char*, std::function<void()>> overlapping[] = {
      {"all_reduce",
       [&] {
         c.all_reduce(z.data(), z.data() + (c.rank() == 1 ? half : x.size()), x.size(),
                      DType::kFloat32);
       }},
      {"reduce_scatter",
       [&] {
         c.reduce_scatter(z.data(), z.data() + (c.rank() == 1 ? 1 : x.size()), per,
                          DType::kFloat32);
       }},
  };
  for (const auto& [op, call] : overlapping) {
    try {
      call();
      EXPECT(c.world_size() == 1, "%s with dst inside src on rank 1: no error", op);
    } catch (const commfuse::InvalidArgument& e) {
      EXPECT(c.rank() == 1 && std::strstr(e.what(), "overlaps src without being it") != nullptr,
             "rank %d: %s", c.rank(), e.what());
      std::printf("rank %d: got expected PARAM_INVALID: %s\n", c.rank(), e.what());
    } catch (const commfuse::RuntimeFailure& e) {
      EXPECT(c.rank() != 1 && std::strstr(e.what(), "rank 1") != nullptr, "rank %d: %s", c.rank(),
             e.what());
    }
  }
  std::fill(y.begin(), y.end(), 0.0f);
  c.all_reduce(x.data(), y.data(), x.size(), DType::kFloat32);
  EXPECT(y[0] == static_cast<float>(c.world_size()), "the all_reduce after them gave %g", y[0]);
  return 0;
}

int case_c_api(commfuse::Comm& cpp_comm) {
  // A second communicator through the C API, next to the C++ one.
  commfuseComm_t comm = nullptr;
  const std::string init = multirank::another_init_method(cpp_comm);
  const int rank = cpp_comm.rank();
  const int size = cpp_comm.world_size();
  EXPECT(commfuseCommInitRank(rank, size, init.c_str(), &comm) == COMMFUSE_SUCCESS, "%s",
         commfuseGetLastErrorMessage());
  if (comm == nullptr) return 1;
  char name[COMMFUSE_COMM_NAME_MAX];
  EXPECT(commfuseCommGetName(comm, name) == COMMFUSE_SUCCESS, "get name");
  EXPECT(&commfuse::find_comm(name) != nullptr, "find_comm(%s)", name);
  int r = -1, w = -1;
  commfuseCommRank(comm, &r);
  commfuseCommSize(comm, &w);
  EXPECT(r == rank && w == size, "rank/size %d/%d", r, w);
  std::vector<float> x(100, static_cast<float>(r)), y(100);
  EXPECT(commfuseAllReduce(x.data(), y.data(), 100, COMMFUSE_FLOAT32, comm) == COMMFUSE_SUCCESS,
         "%s", commfuseGetLastErrorMessage());
  EXPECT(y[99] == static_cast<float>(w * (w - 1) / 2), "sum %g", y[99]);
  EXPECT(commfuseBarrier(comm) == COMMFUSE_SUCCESS, "%s", commfuseGetLastErrorMessage());
  int usable = -1;
  EXPECT(commfuseCommIsUsable(comm, &usable) == COMMFUSE_SUCCESS && usable == 1, "usable %d: %s",
         usable, commfuseGetLastErrorMessage());
  // A rejected call (null buffer on every rank) leaves it usable; abort does not.
  EXPECT(
      commfuseAllReduce(nullptr, y.data(), 100, COMMFUSE_FLOAT32, comm) == COMMFUSE_PARAM_NULLPTR,
      "%s", commfuseGetLastErrorMessage());
  EXPECT(commfuseCommIsUsable(comm, &usable) == COMMFUSE_SUCCESS && usable == 1,
         "usable %d after a rejected call", usable);
  EXPECT(commfuseCommAbort(comm) == COMMFUSE_SUCCESS, "%s", commfuseGetLastErrorMessage());
  EXPECT(commfuseCommIsUsable(comm, &usable) == COMMFUSE_SUCCESS && usable == 0 &&
             std::strstr(commfuseGetLastErrorMessage(), "aborted") != nullptr,
         "usable %d after abort: %s", usable, commfuseGetLastErrorMessage());
  EXPECT(commfuseBarrier(comm) == COMMFUSE_RUNTIME_ERROR, "barrier after abort: %s",
         commfuseGetLastErrorMessage());
  EXPECT(commfuseCommIsUsable(nullptr, &usable) == COMMFUSE_PARAM_NULLPTR, "null comm");
  EXPECT(commfuseCommDestroy(comm) == COMMFUSE_SUCCESS, "destroy");
  try {
    commfuse::find_comm(name);
    EXPECT(false, "destroyed comm still registered");
  } catch (const commfuse::InvalidArgument&) {
  }
  // The dead handle is refused, never read or freed again.
  int stale_rank = -1;
  EXPECT(commfuseCommRank(comm, &stale_rank) == COMMFUSE_PARAM_INVALID &&
             std::strstr(commfuseGetLastErrorMessage(), "comm is not a live communicator"),
         "rank of a destroyed comm: %s", commfuseGetLastErrorMessage());
  EXPECT(commfuseCommDestroy(comm) == COMMFUSE_PARAM_INVALID, "comm destroyed twice: %s",
         commfuseGetLastErrorMessage());
  EXPECT(commfuseCommDestroy(nullptr) == COMMFUSE_SUCCESS, "destroy(NULL)");
  return 0;
}

// expect_ranks_ok.sh's jobs end when the first rank exits: a rank that skips MPI_Finalize
// (its communicator failed) makes mpirun kill the others, maybe before they print their OK
// line. There CF_OK_DIR and CF_OK_RANKS are set: each rank, once its line is out, leaves a
// file in CF_OK_DIR and waits (up to 20 s) for the files of every rank in CF_OK_RANKS.
void wait_for_listed_ranks(int rank) {
  const char* dir = std::getenv("CF_OK_DIR");
  const char* ranks = std::getenv("CF_OK_RANKS");
  if (dir == nullptr || ranks == nullptr) return;
  const std::string mine = std::string(dir) + "/ok." + std::to_string(rank);
  if (FILE* f = std::fopen(mine.c_str(), "w")) std::fclose(f);
  std::vector<std::string> wanted;
  for (const char* p = ranks; *p != '\0';) {
    const char* end = std::strchr(p, ',');
    const std::string r = end ? std::string(p, end) : std::string(p);
    wanted.push_back(std::string(dir) + "/ok." + r);
    p = end ? end + 1 : p + r.size();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::all_of(wanted.begin(), wanted.end(),
                    [](const std::string& f) { return access(f.c_str(), F_OK) == 0; }))
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::function<int(commfuse::Comm&)>> cases = {
      {"collectives", case_collectives},
      {"many_ops", case_many_ops},
      {"kill_peer", case_kill_peer},
      {"exit_after_init", case_exit_after_init},
      {"mismatch", case_mismatch},
      {"out_of_step", case_out_of_step},
      {"bad_arg", case_bad_arg},
      {"c_api", case_c_api},
      {"streams", case_streams},
      {"stream_mismatch", case_stream_mismatch},
      {"dtype_reject", case_dtype_reject},
      {"late_rank", case_late_rank},
      {"abort_thread", case_abort_thread},
      {"abort_stream", case_abort_stream},
      {"interrupt_thread", case_interrupt_thread},
      {"interrupt_stream", case_interrupt_stream},
      {"abort_idle", case_abort_idle},
      {"stage_oom", case_stage_oom},
      {"two_threads", case_two_threads},
      {"two_comms_threads", case_two_comms_threads},
      {"fork_child", case_fork_child},
      {"slow_peer", case_slow_peer},
      {"stage_overlap", case_stage_overlap},
      {"testsome_error", case_testsome_error},
      {"stream_testsome_error", case_stream_testsome_error},
      {"destroy_in_flight", case_destroy_in_flight},
      {"destroy_in_flight_op", case_destroy_in_flight_op},
      {"peer_destroyed", case_peer_destroyed},
  };
  if (argc != 2 || !cases.count(argv[1])) {
    std::fprintf(stderr, "usage: %s <case>\n", argv[0]);
    return 2;
  }
  int rc = 0;
  try {
    auto comm = commfuse::Comm::from_env();
    rc = cases.at(argv[1])(*comm);
    if (g_failures == 0 && rc == 0)
      std::printf("rank %d: %s OK (world %d, transport %s)\n", comm->rank(), argv[1],
                  comm->world_size(), comm->transport_name());
    std::fflush(stdout);  // mpirun may end the job before exit flushes (abort_thread)
    if (g_failures == 0 && rc == 0) wait_for_listed_ranks(comm->rank());
  } catch (const commfuse::Error& e) {
    std::fprintf(stderr, "unexpected error %d: %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
  return g_failures == 0 ? rc : 1;
}
