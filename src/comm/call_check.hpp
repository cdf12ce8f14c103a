// Which user call a collective belongs to, and the check every transport makes at a call's
// first synchronization: every rank's descriptor is compared before any data is delivered
// (MPI's early blocks may be on the wire: drained when the call fails), so a
// rejection or a mismatch is seen by every rank at the same point and fails the call on
// each of them alike — leaving the communicator usable (issue 14: argument errors are
// local; only transport failures are fatal).
//
// An operator's execute opens a CallScope with its signature — the operator's name and
// the arguments that every rank must pass alike (m, k, n, dtype, the chosen algorithm...)
// — and every collective it runs carries the signature on the wire, so a mismatch is
// reported in the user's terms ("all_gather_matmul: rank 1 passed m (x1 rows) 5, rank 0
// passed 4") rather than in the transport's ("gather_stream count 1280 int8"). Thread-local
// because the collectives are several layers below the op and a rank may run ops from
// several threads on different communicators.
#pragma once

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "comm/transport.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"

namespace commfuse::comm {

struct CallSignature {
  static constexpr int kMaxFields = 8;
  using NameFn = const char* (*)(int64_t value);
  const char* op = nullptr;  // the operator, as the user called it; null: a plain collective
  int nfields = 0;
  const char* labels[kMaxFields] = {};  // "m (x1 rows)": what the user passed
  int64_t values[kMaxFields] = {};
  NameFn names[kMaxFields] = {};  // prints an enum value (dtype, algorithm) by name

  // Appends one field; returns *this so plans can chain add(...).add(...).
  CallSignature& add(const char* label, int64_t value, NameFn name = nullptr);
  CallSignature& add_dtype(const char* label, DType value);
};

// The signature as it travels with a descriptor (labels stay local: both sides of a
// comparison run the same operator, or the operator names already differ).
struct WireSignature {
  char op[32];
  uint32_t nfields;
  uint32_t reserved;
  int64_t values[CallSignature::kMaxFields];

  bool operator==(const WireSignature&) const = default;
};

// The signature of the call this thread is in (null outside any operator).
const CallSignature* current_call();

// Also the operator call's span in the trace (category "op"), around every piece's.
class CallScope {
 public:
  explicit CallScope(const CallSignature& s);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  const CallSignature* outer_;
  trace::Span span_;
};

// current_call() on the wire; all zero (op "") outside an operator.
WireSignature wire_signature();

// Thrown when every rank learns at the same synchronization that the call cannot proceed
// (a peer rejected it, or the ranks' descriptors disagree): nothing was delivered, so the
// transport stays usable. A RuntimeFailure for the user.
class CallFailed : public RuntimeFailure {
 public:
  using RuntimeFailure::RuntimeFailure;
};

// In a catch block of a transport failure: rethrows it, prefixed "<operator>: " when the
// collective ran inside an operator, so the user reads which of their calls failed
// ("all_gather_matmul: gather_stream(rank 0): rank 1 (pid ..) exited or was killed ...").
[[noreturn]] void rethrow_in_call();

// One rank's descriptor of the call, as a transport received it.
struct PeerCall {
  CollDesc coll;
  uint32_t op_seq = 0;
  bool rejected = false;  // the rank rejected its arguments; reason says why
  bool failed = false;    // the rank's transport failed (fatal); reason says why
  const WireSignature* sig = nullptr;
  std::string_view reason;  // filled only for the report (fail_call)
};

// The transports' wire descriptors (shm Control::Desc, MPI WireDesc) share these fields:
// op (a CollOp, kRejectedOp, or 0 for "failed"), dtype, count, root, op_seq, unit, sig.
template <typename Wire>
void fill_wire(Wire& w, uint32_t op, const CollDesc& d, uint32_t op_seq) {
  w.op = op;
  w.dtype = static_cast<int32_t>(d.dtype);
  w.count = d.count;
  w.root = d.root;
  w.unit = d.piece;
  w.algo = static_cast<uint32_t>(d.algo);
  w.op_seq = op_seq;
  w.sig = wire_signature();
}

// A 64-bit digest of every field same_call compares, mixed 8 bytes at a time (a byte-wise
// hash over these ~150 bytes cost as much as the reads it saves): equal digests stand for
// equal calls (a false match of two different calls is a 64-bit hash collision), different
// ones send the check to the field-by-field comparison that names the difference.
//
// Each word goes through a full 64-bit finalizer (MurmurHash3's fmix64), so every bit of
// every field reaches every bit of the digest and no two-field difference cancels out. The
// 20 words are spread over four independent lanes, combined at the end: one chain of 20
// finalizers (two dependent multiplies each) was the largest per-call cost of a tiny
// all_gather_matmul besides its GEMM (2.6 % of a 1-row call, perf); four lanes shorten the
// chain to 5 words, plus 4 to combine.
namespace detail_digest {
inline uint64_t fmix(uint64_t h, uint64_t v) {
  uint64_t k = h ^ v;
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k + 0x9e3779b97f4a7c15ull;
}
}  // namespace detail_digest

// Every field but op_seq, which changes on every call: call_digest seals it in last, so a
// transport's next call of the same shape reuses this part (CallDigestMemo).
template <typename Wire>
uint64_t call_digest_base(const Wire& w) {
  using detail_digest::fmix;
  // The whole signature as WireSignature::operator== compares it: every value slot (those
  // past nfields are zero, wire_signature fills them) and the reserved word.
  constexpr int kHeader = 7, kName = sizeof w.sig.op / 8, kValues = CallSignature::kMaxFields;
  constexpr int kWords = kHeader + 1 + kName + kValues;
  static_assert(sizeof w.sig.op % 8 == 0 && kWords % 4 == 0);
  uint64_t words[kWords];
  words[0] = w.op;
  words[1] = static_cast<uint32_t>(w.dtype);
  words[2] = w.count;
  words[3] = static_cast<uint32_t>(w.root);
  words[4] = w.unit;
  words[5] = w.algo;
  words[6] = 0;  // op_seq's place: sealed in by call_digest
  words[7] = w.sig.nfields | uint64_t{w.sig.reserved} << 32;
  std::memcpy(words + kHeader + 1, w.sig.op, sizeof w.sig.op);
  for (int i = 0; i < kValues; ++i)
    words[kHeader + 1 + kName + i] = static_cast<uint64_t>(w.sig.values[i]);
  // Word i goes to lane i % 4, in order: a value moved to another slot lands in another
  // lane or at another place in the same lane's chain.
  uint64_t lane[4] = {0x9e3779b97f4a7c15ull, 0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
                      0xa4093822299f31d0ull};
  for (int i = 0; i < kWords; i += 4)
    for (int l = 0; l < 4; ++l) lane[l] = fmix(lane[l], words[i + l]);
  // Lane 0 finalized before each next lane is mixed in, so no difference in one lane
  // cancels one in another.
  return fmix(fmix(fmix(fmix(lane[0], kWords), lane[1]), lane[2]), lane[3]);
}

// A 64-bit digest of bytes bytes at data, never 0 (so that 0 can stand for "absent"): a
// tensor argument every rank must pass with the same values goes into the call's signature
// this way (matmul_all_reduce's bias). Four lanes of 8-byte words as above; 1.4-1.8 us
// per 8 KiB (AMX Xeon, the same loop timed alone, 10^5 calls).
uint64_t bytes_digest(const void* data, size_t bytes);

// fmix is a bijection of base ^ op_seq: for one call's fields, every op_seq gives another
// digest.
inline uint64_t seal_call_digest(uint64_t base, uint32_t op_seq) {
  return detail_digest::fmix(base, op_seq);
}

template <typename Wire>
uint64_t call_digest(const Wire& w) {
  return seal_call_digest(call_digest_base(w), w.op_seq);
}

// call_digest of a transport's calls, one after another: a call whose fields match one of
// the last few distinct calls (the same fields, the next op_seq) reuses that call's base and
// costs one finalizer. The base's chain of finalizers lay on every call's path before its
// flag is raised: a 64-byte all_gather at W = 2 took 0.47 us with it against 0.31-0.37 us
// without (AMX Xeon). Several entries, not one: a fused op may alternate calls (matmul_all_
// reduce's two-phase schedule: an all_to_all_stream, then an all_gather), and with one entry each
// call evicted the other and hashed its fields again (666 of its ~2000 extra instructions, 2 x 256
// bf16 at W = 2).
template <typename Wire>
class CallDigestMemo {
 public:
  static constexpr int kEntries = 4;

  uint64_t operator()(const Wire& w) {
    // The last call's entry first: a repeated call costs one compare.
    if (!entries_[last_].holds(w)) {
      int hit = -1, oldest = 0;
      for (int e = 0; e < kEntries; ++e) {
        if (e != last_ && entries_[e].holds(w)) {
          hit = e;
          break;
        }
        if (entries_[e].used < entries_[oldest].used) oldest = e;
      }
      if (hit < 0) {  // a new call: replaces the least recently used entry
        hit = oldest;
        entries_[hit].remember(w);
        ++bases_;
      }
      last_ = hit;
    }
    entries_[last_].used = ++clock_;
    return seal_call_digest(entries_[last_].base, w.op_seq);
  }
  // How many calls hashed their fields (the others reused a remembered call's).
  uint64_t bases_computed() const { return bases_; }

 private:
  struct Entry {
    // Exactly the fields call_digest_base hashes (the signature bytewise: wire_signature
    // zero-fills it, and it has no padding).
    bool holds(const Wire& w) const {
      return valid && w.op == op && w.dtype == dtype && w.count == count && w.root == root &&
             w.unit == unit && w.algo == algo && std::memcmp(&w.sig, &sig, sizeof sig) == 0;
    }
    void remember(const Wire& w) {
      valid = true;
      op = w.op;
      dtype = w.dtype;
      count = w.count;
      root = w.root;
      unit = w.unit;
      algo = w.algo;
      std::memcpy(&sig, &w.sig, sizeof sig);
      base = call_digest_base(w);
    }

    bool valid = false;
    uint64_t used = 0;  // the memo's clock at its last use (0: never)
    uint64_t base = 0;
    decltype(Wire::op) op{};
    decltype(Wire::dtype) dtype{};
    decltype(Wire::count) count{};
    decltype(Wire::root) root{};
    decltype(Wire::unit) unit{};
    decltype(Wire::algo) algo{};
    WireSignature sig{};
  };
  static_assert(sizeof(WireSignature) ==
                    sizeof WireSignature::op + 8 + 8 * CallSignature::kMaxFields,
                "WireSignature has padding: compare it field by field");

  Entry entries_[kEntries];
  int last_ = 0;
  uint64_t clock_ = 0;
  uint64_t bases_ = 0;
};

template <typename Wire>
PeerCall peer_call(const Wire& w) {
  PeerCall c;
  c.coll.op = static_cast<CollOp>(w.op);
  c.coll.dtype = static_cast<DType>(w.dtype);
  c.coll.count = w.count;
  c.coll.root = w.root;
  c.coll.piece = w.unit;
  c.coll.algo = static_cast<CollAlgo>(w.algo);
  c.op_seq = w.op_seq;
  c.failed = w.op == 0;
  c.rejected = w.op == kRejectedOp;
  c.sig = &w.sig;
  return c;
}

// Whether rank r's descriptor is exactly this rank's (the fast path of every collective).
inline bool same_call(const PeerCall& mine, const PeerCall& theirs) {
  return !theirs.rejected && !theirs.failed && theirs.op_seq == mine.op_seq &&
         theirs.coll == mine.coll && *theirs.sig == *mine.sig;
}

// Called when some rank's descriptor differs from this rank's (all[rank] is mine): throws
// RuntimeFailure (fatal: a failed peer, a different number of calls, different operators
// at the same call: the ranks' calls went out of step) or CallFailed (a
// peer's rejection, naming the first rejecting rank and its message; or the first argument
// on which two ranks disagree, with both values).
[[noreturn]] void fail_call(const char* op, int rank, const std::vector<PeerCall>& all);

// Whether the calls went out of step: different call numbers, or different operators among
// the ranks whose call is known (a rank that rejected a plain collective sent none). The
// verdict fail_call reaches first; a rank that rejected its own call asks it of the peers'
// descriptors, since it runs no fail_call (MpiTransport::reject).
bool calls_out_of_step(const std::vector<PeerCall>& all);

template <typename DescOf>
bool calls_out_of_step(int size, DescOf&& desc_of) {
  std::vector<PeerCall> all;
  for (int r = 0; r < size; ++r) all.push_back(peer_call(desc_of(r)));
  return calls_out_of_step(all);
}

// The check at a call's first synchronization, for either transport: desc_of(r) is rank r's
// wire descriptor (desc_of(rank) this rank's own, written for `desc`). Returns when every
// rank's equals this rank's; otherwise fail_call.
template <typename DescOf>
void check_call(const char* op, int rank, int size, const CollDesc& desc, DescOf&& desc_of) {
  const PeerCall mine = peer_call(desc_of(rank));
  CF_ASSERT(mine.coll == desc);
  bool same = true;
  for (int r = 0; r < size && same; ++r) same = r == rank || same_call(mine, peer_call(desc_of(r)));
  if (same) return;
  std::vector<PeerCall> all;
  for (int r = 0; r < size; ++r) {
    const auto& d = desc_of(r);
    all.push_back(peer_call(d));
    // The reason travels (and is copied in) only from a rank that failed or rejected.
    if (d.op == 0 || d.op == kRejectedOp)
      all.back().reason = std::string_view(d.reason, strnlen(d.reason, sizeof d.reason));
  }
  fail_call(op, rank, all);
}

}  // namespace commfuse::comm
