// Reliability cases (issue 14). recover: a rejected call never kills the group. For every operator
// and collective: a good call, then calls where every rank rejects its arguments, where only the
// last rank does, and where rank 1 passes a shape its peers do not — each followed by the good call
// again, which must succeed on every rank with the same bits as the first. Peers of a rejecting
// rank fail with RuntimeFailure naming it and its message; a mismatch names the argument
// and both values; the communicator stays usable throughout. fault: the operator named by
// COMMFUSE_TEST_OP in a loop while COMMFUSE_FAULT makes one rank die, hang or exit in it
// (tests/ops/run_fault.sh checks what the survivors and the launcher report).
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "numerics.hpp"

namespace optest {
namespace {

using commfuse::TensorView;

enum class Mode {
  kGood,   // valid arguments, the same on every rank
  kBad,    // an argument error this rank finds on its own (rejected in the plan step)
  kOther,  // valid on its own, but a different shape than the good call's (a mismatch)
};

struct OpCase {
  const char* name;
  std::function<void(Mode)> call;
  // What the rejecting rank's error says (checked in its peers' errors too), and the
  // argument a mismatch must be reported as.
  const char* bad_needle;
  const char* mismatch_label;
};

// Buffers big enough for every shape below (R <= 8); inputs depend on the rank, so the good
// call's output is a real all-rank result.
struct Buffers {
  std::vector<uint8_t> a = std::vector<uint8_t>(1 << 16);
  std::vector<uint8_t> b = std::vector<uint8_t>(1 << 16);
  std::vector<uint8_t> s = std::vector<uint8_t>(1 << 14);
  std::vector<uint8_t> out = std::vector<uint8_t>(1 << 16);
  std::vector<uint8_t> out2 = std::vector<uint8_t>(1 << 16);

  explicit Buffers(int rank) {
    // Small integers: exact in every dtype used and in every sum.
    auto fill_f32 = [&](std::vector<uint8_t>& v, int salt) {
      auto* f = reinterpret_cast<float*>(v.data());
      for (size_t i = 0; i < v.size() / 4; ++i)
        f[i] = static_cast<float>(static_cast<int>((i * 7 + rank * 3 + salt) % 5) - 2);
    };
    fill_f32(a, 1);
    fill_f32(b, 2);
    auto* sc = reinterpret_cast<float*>(s.data());
    for (size_t i = 0; i < s.size() / 4; ++i) sc[i] = 0.5f;
  }
  void clear_outputs() {
    std::fill(out.begin(), out.end(), uint8_t{0xCD});
    std::fill(out2.begin(), out2.end(), uint8_t{0xCD});
  }
};

// Converts the first n fp32 values of v to dtype in place (16-bit or int8 codes).
void narrow(std::vector<uint8_t>& v, size_t n, DType dtype) {
  std::vector<uint8_t> tmp(n * 4);
  commfuse::convert(v.data(), DType::kFloat32, tmp.data(), dtype, n);
  std::memcpy(v.data(), tmp.data(), n * static_cast<size_t>(commfuse::dtype_bits(dtype)) / 8);
}

// COMMFUSE_TEST_COMM_TURN (set by the fault tests): the matmul ops' comm_turn, so that their
// streams run several pieces and a fault at piece 1 lands inside a stream.
int64_t test_comm_turn() {
  const char* v = std::getenv("COMMFUSE_TEST_COMM_TURN");
  return v != nullptr ? std::atoll(v) : 0;
}

std::vector<OpCase> op_cases(commfuse::Comm& comm, Buffers& b, Buffers& h16, Buffers& i8) {
  const int R = comm.world_size();
  commfuse::AllGatherMatmulOptions agm;
  commfuse::MatmulReduceOptions reduce;
  agm.comm_turn = reduce.comm_turn = test_comm_turn();
  const std::string g = comm.name();
  constexpr DType F32 = DType::kFloat32, F16 = DType::kFloat16, I8 = DType::kInt8;
  constexpr int64_t k = 16, n = 8;
  // Rows per rank: the good call's, or (kOther) one block more.
  auto rows = [](Mode m, int64_t good, int64_t step) {
    return m == Mode::kOther ? good + step : good;
  };
  auto kx2 = [k](Mode m) { return m == Mode::kBad ? k + 1 : k; };  // "x2 dim 0" errors
  std::vector<OpCase> v;
  v.push_back({"all_gather_matmul",
               [&, g, R, rows, kx2, agm](Mode m) {
                 const int64_t mm = rows(m, 4, 1);
                 commfuse::all_gather_matmul(TensorView(b.a.data(), F32, {mm, k}),
                                             TensorView(b.b.data(), F32, {kx2(m), n}), g, R,
                                             TensorView(b.out.data(), F32, {mm * R, n}),
                                             TensorView(b.out2.data(), F32, {mm * R, k}), agm);
               },
               "x2 dim 0", "m (x1 rows)"});
  v.push_back({"matmul_reduce_scatter",
               [&, g, R, rows, kx2, reduce](Mode m) {
                 const int64_t mm = rows(m, 2 * R, R);
                 commfuse::matmul_reduce_scatter(
                     TensorView(b.a.data(), F32, {mm, k}), TensorView(b.b.data(), F32, {kx2(m), n}),
                     g, R, TensorView(b.out.data(), F32, {mm / R, n}), reduce);
               },
               "x2 dim 0", "m (x1 rows)"});
  v.push_back({"matmul_all_reduce",
               [&, g, rows, kx2, reduce](Mode m) {
                 const int64_t mm = rows(m, 4, 1);
                 commfuse::matmul_all_reduce(TensorView(b.a.data(), F32, {mm, k}),
                                             TensorView(b.b.data(), F32, {kx2(m), n}), g,
                                             TensorView(b.out.data(), F32, {mm, n}), reduce);
               },
               "x2 dim 0", "m (x1 rows)"});
  // alltoall ops: x1 (BS, H), x2 (R*H, N); kBad gives x2 one row too many.
  constexpr int64_t h = 8;
  v.push_back({"alltoall_matmul",
               [&, g, R, rows](Mode m) {
                 const int64_t bs = rows(m, 2 * R, R);
                 commfuse::alltoall_matmul(
                     TensorView(h16.a.data(), F16, {bs, h}),
                     TensorView(h16.b.data(), F16, {R * h + (m == Mode::kBad ? 1 : 0), n}), g,
                     TensorView(h16.out.data(), F16, {bs / R, n}));
               },
               "x2 dim 0", "BS (x1 rows)"});
  v.push_back({"alltoall_quant_matmul",
               [&, g, R, rows](Mode m) {
                 const int64_t bs = rows(m, 2 * R, R);
                 commfuse::alltoall_quant_matmul(
                     TensorView(h16.a.data(), F16, {bs, h}),
                     TensorView(i8.b.data(), I8, {R * h + (m == Mode::kBad ? 1 : 0), n}),
                     TensorView(b.s.data(), F32, {n}), g,
                     TensorView(h16.out.data(), F16, {bs / R, n}));
               },
               "x2 dim 0", "BS (x1 rows)"});
  // Quantized reductions: int8 codes (BS, 128), one fp32 scale per row; kBad: a scale
  // tensor with one row too few.
  constexpr int64_t qh = 128;
  for (bool rs : {false, true})
    v.push_back(
        {rs ? "quant_reduce_scatter" : "quant_all_reduce",
         [&, g, R, rows, rs](Mode m) {
           const int64_t bs = rows(m, 2 * R, R);
           const TensorView x(i8.a.data(), I8, {bs, qh});
           const TensorView s(b.s.data(), F32, {m == Mode::kBad ? bs - 1 : bs, 1});
           if (rs)
             commfuse::quant_reduce_scatter(x, s, g, TensorView(b.out.data(), F32, {bs / R, qh}));
           else
             commfuse::quant_all_reduce(x, s, g, TensorView(b.out.data(), F32, {bs, qh}));
         },
         "scales", "BS (x rows)"});
  // The output dtype must agree across ranks too (it picks quant_all_reduce's algorithm off
  // shm): kOther asks for bfloat16 where the peers ask for float32.
  v.push_back(
      {"quant_all_reduce",
       [&, g, R](Mode m) {
         const int64_t bs = 2 * R;
         const TensorView x(i8.a.data(), I8, {bs, qh});
         const TensorView s(b.s.data(), F32, {m == Mode::kBad ? bs - 1 : bs, 1});
         commfuse::quant_all_reduce(
             x, s, g,
             TensorView(b.out.data(), m == Mode::kOther ? DType::kBFloat16 : F32, {bs, qh}));
       },
       "scales", "output dtype"});
  // The collectives: kBad passes a null source, kOther a different count.
  auto count = [](Mode m) { return size_t{m == Mode::kOther ? 96u : 64u}; };
  auto src = [&](Mode m) -> const void* { return m == Mode::kBad ? nullptr : b.a.data(); };
  v.push_back({"all_reduce",
               [&, count, src](Mode m) { comm.all_reduce(src(m), b.out.data(), count(m), F32); },
               "src is null", "count"});
  v.push_back({"all_gather",
               [&, count, src](Mode m) { comm.all_gather(src(m), b.out.data(), count(m), F32); },
               "src is null", "count"});
  v.push_back(
      {"reduce_scatter",
       [&, count, src](Mode m) { comm.reduce_scatter(src(m), b.out.data(), count(m), F32); },
       "src is null", "count"});
  v.push_back({"all_to_all",
               [&, count, src](Mode m) { comm.all_to_all(src(m), b.out.data(), count(m), F32); },
               "src is null", "count"});
  v.push_back({"broadcast",
               [&, count](Mode m) {
                 std::memcpy(b.out.data(), b.a.data(), 96 * 4);
                 comm.broadcast(m == Mode::kBad ? nullptr : b.out.data(), count(m), F32, 0);
               },
               "buf is null", "count"});
  return v;
}

// The outputs a good call wrote (both output buffers of every dtype's buffers).
std::vector<uint8_t> outputs(const Buffers& b, const Buffers& h16) {
  std::vector<uint8_t> all(b.out);
  all.insert(all.end(), b.out2.begin(), b.out2.end());
  all.insert(all.end(), h16.out.begin(), h16.out.end());
  return all;
}

bool contains(const char* s, const std::string& needle) {
  return std::strstr(s, needle.c_str()) != nullptr;
}

}  // namespace

int case_recover(commfuse::Comm& comm) {
  const int R = comm.world_size(), me = comm.rank();
  EXPECT(R >= 2, "the recover case needs at least 2 ranks (world %d)", R);
  if (R < 2) return 1;
  Buffers b(me), h16(me), i8(me);
  narrow(h16.a, h16.a.size() / 4, DType::kFloat16);
  narrow(h16.b, h16.b.size() / 4, DType::kFloat16);
  narrow(i8.a, i8.a.size() / 4, DType::kInt8);
  narrow(i8.b, i8.b.size() / 4, DType::kInt8);
  const int last = R - 1;
  for (const OpCase& c : op_cases(comm, b, h16, i8)) {
    auto good = [&](const char* after) {
      b.clear_outputs();
      h16.clear_outputs();
      try {
        c.call(Mode::kGood);
      } catch (const commfuse::Error& e) {
        EXPECT(false, "%s: the good call after %s failed: %s", c.name, after, e.what());
      }
      return outputs(b, h16);
    };
    const std::vector<uint8_t> ref = good("nothing");
    // 1. Every rank rejects: each gets its own argument error, nothing was sent.
    try {
      c.call(Mode::kBad);
      EXPECT(false, "%s: a bad call was accepted", c.name);
    } catch (const commfuse::InvalidArgument& e) {
      EXPECT(contains(e.what(), c.bad_needle), "%s: %s", c.name, e.what());
    } catch (const commfuse::NullPointerError& e) {
      EXPECT(contains(e.what(), c.bad_needle), "%s: %s", c.name, e.what());
    } catch (const commfuse::Error& e) {
      EXPECT(false, "%s, every rank bad: rank %d got status %d: %s", c.name, me,
             static_cast<int>(e.code()), e.what());
    }
    EXPECT(comm.usable(), "%s: unusable after every rank rejected: %s", c.name,
           comm.failure().c_str());
    EXPECT(good("every rank rejected") == ref, "%s: different result after every rank rejected",
           c.name);
    // 2. Only the last rank rejects: the others fail naming it and its message.
    try {
      c.call(me == last ? Mode::kBad : Mode::kGood);
      EXPECT(false, "%s, rank %d rejects: rank %d got no error", c.name, last, me);
    } catch (const commfuse::RuntimeFailure& e) {
      EXPECT(me != last, "%s: the rejecting rank got RUNTIME_ERROR: %s", c.name, e.what());
      EXPECT(contains(e.what(), "rank " + std::to_string(last) + " rejected") &&
                 contains(e.what(), c.bad_needle) && contains(e.what(), c.name),
             "%s: a peer's error does not name rank %d, its message and the op: %s", c.name, last,
             e.what());
    } catch (const commfuse::Error& e) {
      EXPECT(me == last && contains(e.what(), c.bad_needle), "%s, rank %d rejects: rank %d: %s",
             c.name, last, me, e.what());
    }
    EXPECT(comm.usable(), "%s: unusable after rank %d rejected: %s", c.name, last,
           comm.failure().c_str());
    EXPECT(good("one rank rejected") == ref, "%s: different result after one rank rejected",
           c.name);
    // 3. Rank 1 passes a different shape: every rank fails, naming the argument and values.
    try {
      c.call(me == 1 ? Mode::kOther : Mode::kGood);
      EXPECT(false, "%s, mismatched shapes: rank %d got no error", c.name, me);
    } catch (const commfuse::RuntimeFailure& e) {
      const std::string other = me == 1 ? "rank 0 passed " : "rank 1 passed ";
      EXPECT(contains(e.what(), other + c.mismatch_label) &&
                 contains(e.what(), "every rank must pass the same") && contains(e.what(), c.name),
             "%s: mismatch message lacks '%s%s': %s", c.name, other.c_str(), c.mismatch_label,
             e.what());
      if (me == 0) std::printf("rank 0: %s mismatch: %s\n", c.name, e.what());
    } catch (const commfuse::Error& e) {
      EXPECT(false, "%s, mismatched shapes: rank %d got status %d: %s", c.name, me,
             static_cast<int>(e.code()), e.what());
    }
    EXPECT(comm.usable(), "%s: unusable after a mismatch: %s", c.name, comm.failure().c_str());
    EXPECT(good("a mismatch") == ref, "%s: different result after a mismatch", c.name);
  }
  return 0;
}

int case_fault(commfuse::Comm& comm) {
  const char* op = std::getenv("COMMFUSE_TEST_OP");
  const char* fault = std::getenv("COMMFUSE_FAULT");
  EXPECT(op != nullptr && fault != nullptr,
         "the fault case needs COMMFUSE_TEST_OP and COMMFUSE_FAULT");
  if (op == nullptr || fault == nullptr) return 1;
  const int faulty = std::atoi(fault);
  Buffers b(comm.rank()), h16(comm.rank()), i8(comm.rank());
  narrow(h16.a, h16.a.size() / 4, DType::kFloat16);
  narrow(h16.b, h16.b.size() / 4, DType::kFloat16);
  narrow(i8.a, i8.a.size() / 4, DType::kInt8);
  narrow(i8.b, i8.b.size() / 4, DType::kInt8);
  const std::vector<OpCase> ops = op_cases(comm, b, h16, i8);
  const OpCase* c = nullptr;
  for (const OpCase& o : ops)  // the first entry of that name (quant_all_reduce has two)
    if (c == nullptr && std::string(o.name) == op) c = &o;
  EXPECT(c != nullptr, "COMMFUSE_TEST_OP=%s is not an operator of this test", op);
  if (c == nullptr) return 1;
  // all_reduce: enough data for several shm steps, so a fault at piece 1 or 2 hits mid-call.
  std::vector<float> big(8192, 1.0f), big_out(big.size());
  // COMMFUSE_TEST_BIG_PIECES: all_gather_matmul with 16 MiB per rank (comm_turn 2), far past
  // MPI's eager limit, so a stalled sender leaves the survivors' receives matched and
  // unfinished (their clean-up waited on them forever; 2 MiB per rank did not show it).
  const bool big_pieces = std::getenv("COMMFUSE_TEST_BIG_PIECES") != nullptr;
  const int64_t big_m = 4096, big_k = 1024, big_n = 8;
  std::vector<float> bx1(big_pieces ? big_m * big_k : 0, 1.0f), bx2(big_k * big_n, 0.5f),
      bout(big_pieces ? big_m * comm.world_size() * big_n : 0);
  for (int i = 0; i < 20; ++i) {
    try {
      if (std::string(op) == "all_reduce") {
        comm.all_reduce(big.data(), big_out.data(), big.size(), DType::kFloat32);
      } else if (big_pieces) {
        commfuse::AllGatherMatmulOptions o;
        o.comm_turn = 2;
        o.gather_output = false;
        commfuse::all_gather_matmul(
            TensorView(bx1.data(), DType::kFloat32, {big_m, big_k}),
            TensorView(bx2.data(), DType::kFloat32, {big_k, big_n}), comm.name(), comm.world_size(),
            TensorView(bout.data(), DType::kFloat32, {big_m * comm.world_size(), big_n}), {}, o);
      } else {
        c->call(Mode::kGood);
      }
    } catch (const commfuse::RuntimeFailure& e) {
      // The test script counts these lines: every survivor must print one.
      std::printf("rank %d: got expected error: %s\n", comm.rank(), e.what());
      std::fflush(stdout);
      EXPECT(contains(e.what(), "rank " + std::to_string(faulty)) && contains(e.what(), op),
             "the error does not name rank %d and %s: %s", faulty, op, e.what());
      EXPECT(!comm.usable(), "usable after a peer's failure");
      // Exit non-zero, as a job whose peer failed does: a launcher then stops the others
      // (a stalled rank never exits by itself).
      return optest::g_failures == 0 ? 4 : 1;  // 3 is what COMMFUSE_FAULT=...:exit exits with
    }
  }
  EXPECT(false, "rank %d: 20 calls of %s and no failure (COMMFUSE_FAULT=%s)", comm.rank(), op,
         fault);
  return 1;
}

}  // namespace optest
