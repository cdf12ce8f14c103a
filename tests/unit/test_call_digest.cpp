// The shm transport's call digest (comm/call_check.hpp): equal calls give equal digests, and a
// change in any one field the check compares gives a different one. (Two different calls
// with equal digests would pass the check unnoticed: the digest is the check's fast path.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/call_check.hpp"
#include "comm/shm/peer_set.hpp"

namespace {

using commfuse::comm::call_digest;
using commfuse::comm::CallDigestMemo;
using commfuse::comm::shm::Control;

Control::Desc base_desc(int fields) {
  Control::Desc d;
  std::memset(&d, 0, sizeof d);
  d.op = 3;
  d.dtype = 7;
  d.count = 4096;
  d.root = -1;
  d.op_seq = 41;
  d.unit = 512;
  d.algo = 1;
  std::snprintf(d.sig.op, sizeof d.sig.op, "all_gather_matmul");
  d.sig.nfields = static_cast<uint32_t>(fields);
  for (int i = 0; i < fields; ++i) d.sig.values[i] = 100 + i;
  return d;
}

TEST(CallDigest, EqualCallsGiveEqualDigests) {
  for (int fields = 0; fields <= commfuse::comm::CallSignature::kMaxFields; ++fields) {
    const Control::Desc a = base_desc(fields);
    Control::Desc b = base_desc(fields);
    b.cma_address = 12345;  // not part of the call: where the data lies
    std::snprintf(b.reason, sizeof b.reason, "not compared either");
    EXPECT_EQ(call_digest(a), call_digest(b)) << fields << " fields";
  }
}

TEST(CallDigest, EveryComparedFieldChangesIt) {
  // Every signature length (the lanes fill differently), every field alone.
  for (int fields = 0; fields <= commfuse::comm::CallSignature::kMaxFields; ++fields) {
    const Control::Desc a = base_desc(fields);
    std::vector<std::function<void(Control::Desc&)>> changes = {
        [](Control::Desc& d) { d.op += 1; },
        [](Control::Desc& d) { d.dtype += 1; },
        [](Control::Desc& d) { d.count += 1; },
        [](Control::Desc& d) { d.count ^= uint64_t{1} << 63; },
        [](Control::Desc& d) { d.root = 0; },
        [](Control::Desc& d) { d.op_seq += 1; },
        [](Control::Desc& d) { d.unit += 64; },
        [](Control::Desc& d) { d.algo = 2; },
        [](Control::Desc& d) { d.sig.op[0] = 'b'; },
        [](Control::Desc& d) { d.sig.op[sizeof d.sig.op - 1] = 'x'; },
    };
    if (fields < commfuse::comm::CallSignature::kMaxFields)
      changes.push_back([](Control::Desc& d) { ++d.sig.nfields; });  // one more (zero) value
    for (int i = 0; i < fields; ++i) {
      changes.push_back([i](Control::Desc& d) { d.sig.values[i] += 1; });
      changes.push_back([i](Control::Desc& d) { d.sig.values[i] = -d.sig.values[i]; });
    }
    // Two values swapped: neighbours (other lanes), and the first and last.
    if (fields >= 2)
      changes.push_back([](Control::Desc& d) { std::swap(d.sig.values[0], d.sig.values[1]); });
    if (fields >= 3)
      changes.push_back(
          [fields](Control::Desc& d) { std::swap(d.sig.values[0], d.sig.values[fields - 1]); });
    std::set<uint64_t> seen{call_digest(a)};
    for (size_t c = 0; c < changes.size(); ++c) {
      Control::Desc b = a;
      changes[c](b);
      EXPECT_NE(call_digest(a), call_digest(b)) << fields << " fields, change " << c;
      EXPECT_TRUE(seen.insert(call_digest(b)).second)
          << fields << " fields, change " << c << " collides with another change";
    }
  }
}

TEST(CallDigest, CoversTheWholeSignatureAsItIsCompared) {
  // WireSignature::operator== compares every value slot and the reserved word, so the digest
  // covers them too (wire_signature zero-fills what a signature does not use).
  const Control::Desc a = base_desc(3);
  Control::Desc b = a;
  b.sig.values[5] = 999;
  EXPECT_FALSE(a.sig == b.sig);
  EXPECT_NE(call_digest(a), call_digest(b));
  Control::Desc c = a;
  c.sig.reserved = 1;
  EXPECT_FALSE(a.sig == c.sig);
  EXPECT_NE(call_digest(a), call_digest(c));
}

// The memo a transport keeps gives exactly call_digest, call after call: when the same call
// repeats with the next op_seq, when any one field changes, and when it changes back.
TEST(CallDigest, MemoGivesCallDigestOnEveryCall) {
  CallDigestMemo<Control::Desc> memo;
  Control::Desc d = base_desc(4);
  std::vector<std::function<void(Control::Desc&)>> changes = {
      [](Control::Desc& x) { x.op += 1; },           [](Control::Desc& x) { x.dtype += 1; },
      [](Control::Desc& x) { x.count += 1; },        [](Control::Desc& x) { x.root = 0; },
      [](Control::Desc& x) { x.unit += 64; },        [](Control::Desc& x) { x.algo = 2; },
      [](Control::Desc& x) { x.sig.op[5] ^= 1; },    [](Control::Desc& x) { ++x.sig.nfields; },
      [](Control::Desc& x) { x.sig.reserved = 1; },  [](Control::Desc& x) { x.sig.values[3] += 1; },
      [](Control::Desc& x) { x.sig.values[7] = 5; },
  };
  std::set<uint64_t> seen;
  auto check = [&](const Control::Desc& x, const std::string& what) {
    const uint64_t got = memo(x);
    EXPECT_EQ(got, call_digest(x)) << what;
    EXPECT_TRUE(seen.insert(got).second) << what << ": a digest seen before";
  };
  for (int repeat = 0; repeat < 3; ++repeat, ++d.op_seq)
    check(d, "repeat " + std::to_string(repeat));
  EXPECT_EQ(memo.bases_computed(), 1u) << "a repeated call hashed its fields again";
  for (size_t c = 0; c < changes.size(); ++c) {
    Control::Desc changed = d;
    changes[c](changed);
    ++d.op_seq;
    changed.op_seq = d.op_seq;
    check(changed, "change " + std::to_string(c));
    ++d.op_seq;
    check(d, "back after change " + std::to_string(c));
  }
  // Each change hashed once; going back found d's base still remembered.
  EXPECT_EQ(memo.bases_computed(), 1 + changes.size());
  // Fields the call check does not compare leave the digest (and the memo's base) alone.
  Control::Desc other = d;
  other.cma_address = 777;
  std::snprintf(other.reason, sizeof other.reason, "ignored");
  EXPECT_EQ(memo(other), call_digest(d));
  EXPECT_EQ(memo.bases_computed(), 1 + changes.size());
}

// Calls that alternate (a fused op's stream, then its collective) each keep their base; more
// distinct calls than the memo holds still get exactly call_digest, the least recently used
// giving way.
TEST(CallDigest, MemoKeepsTheLastFewCalls) {
  using Memo = CallDigestMemo<Control::Desc>;
  std::vector<Control::Desc> calls;
  for (int c = 0; c <= Memo::kEntries; ++c) {
    Control::Desc x = base_desc(3);
    x.count += static_cast<uint64_t>(c);
    calls.push_back(x);
  }
  Memo memo;
  uint32_t seq = 1;
  // By reference: a 64-byte-aligned parameter by value draws GCC's ABI note.
  auto call = [&](const Control::Desc& d) {
    Control::Desc x = d;
    x.op_seq = seq++;
    EXPECT_EQ(memo(x), call_digest(x)) << "count " << x.count << ", op_seq " << x.op_seq;
  };
  for (int round = 0; round < 3; ++round) {
    call(calls[0]);
    call(calls[1]);
  }
  EXPECT_EQ(memo.bases_computed(), 2u) << "two alternating calls hashed their fields again";
  // kEntries + 1 calls in rotation: each evicts the one that comes next, so every call hashes.
  for (int round = 0; round < 2; ++round)
    for (const Control::Desc& x : calls) call(x);
  EXPECT_EQ(memo.bases_computed(), 2u + 2 * calls.size() - 2)
      << "calls 0 and 1 were remembered from the alternation in the first round only";
  // The most recent kEntries calls are all remembered.
  const uint64_t before = memo.bases_computed();
  for (size_t i = 1; i < calls.size(); ++i) call(calls[i]);
  EXPECT_EQ(memo.bases_computed(), before);
}

}  // namespace
