#include "comm/call_check.hpp"

#include <cstring>

#include "core/error.hpp"

namespace commfuse::comm {
namespace {

thread_local const CallSignature* t_call = nullptr;

std::string value_str(const CallSignature& s, int i, int64_t v) {
  if (s.names[i] != nullptr)
    if (const char* name = s.names[i](v)) return name;
  return std::to_string(v);
}

const char* dtype_or_number(int64_t v) {
  try {
    return dtype_name(static_cast<DType>(v)).data();  // names are string literals
  } catch (const Error&) {
    return "(not a dtype)";
  }
}

// The operator a descriptor belongs to: its signature's name, or the collective's.
std::string call_name(const PeerCall& c) {
  if (c.sig->op[0] != '\0') return std::string(c.sig->op, strnlen(c.sig->op, sizeof c.sig->op));
  return coll_op_name(c.coll.op);
}

// Whether c says which call its rank made: a rank that rejected a plain collective sends an
// empty descriptor (an operator's rejection carries the operator's signature).
bool known(const PeerCall& c) {
  return !c.rejected || c.sig->op[0] != '\0';
}

}  // namespace

CallSignature& CallSignature::add(const char* label, int64_t value, NameFn name) {
  CF_ASSERT(nfields < kMaxFields);
  labels[nfields] = label;
  values[nfields] = value;
  names[nfields] = name;
  ++nfields;
  return *this;
}

CallSignature& CallSignature::add_dtype(const char* label, DType value) {
  return add(label, static_cast<int64_t>(value), dtype_or_number);
}

const CallSignature* current_call() {
  return t_call;
}

CallScope::CallScope(const CallSignature& s)
    : outer_(t_call), span_(s.op != nullptr ? s.op : "call", "op") {
  t_call = &s;
}

CallScope::~CallScope() {
  t_call = outer_;
}

WireSignature wire_signature() {
  WireSignature w{};
  const CallSignature* s = t_call;
  if (s == nullptr) return w;
  // w is zeroed: the name's bytes only (strncpy would zero-fill the rest again, per call).
  std::memcpy(w.op, s->op, strnlen(s->op, sizeof w.op - 1));
  w.nfields = static_cast<uint32_t>(s->nfields);
  for (int i = 0; i < s->nfields; ++i) w.values[i] = s->values[i];
  return w;
}

void rethrow_in_call() {
  const CallSignature* call = t_call;
  if (call == nullptr) throw;
  try {
    throw;
  } catch (const Error& e) {
    detail::throw_status(e.code(), detail::cat(call->op, ": ", e.what()));
  }
}

bool calls_out_of_step(const std::vector<PeerCall>& all) {
  const PeerCall* first = nullptr;        // the first rank that did not fail
  const PeerCall* first_known = nullptr;  // the first of those whose call is known
  for (const PeerCall& c : all) {
    if (c.failed) continue;  // a failed rank's descriptor says nothing of its call
    if (first == nullptr)
      first = &c;
    else if (c.op_seq != first->op_seq)
      return true;
    if (!known(c)) continue;
    if (first_known == nullptr)
      first_known = &c;
    else if (call_name(c) != call_name(*first_known))
      return true;
  }
  return false;
}

void fail_call(const char* op, int rank, const std::vector<PeerCall>& all) {
  const PeerCall& mine = all[rank];
  const std::string me = detail::cat(call_name(mine), "(rank ", rank, "): ");
  const int size = static_cast<int>(all.size());
  // A failed peer first: its transport is gone, so this call — and the communicator — are too.
  for (int r = 0; r < size; ++r)
    if (r != rank && all[r].failed)
      detail::throw_status(Status::kRuntimeError, detail::cat(op, "(rank ", rank, "): rank ", r,
                                                              " failed: ", all[r].reason));
  // Ranks that made different numbers of calls have lost step: nothing after is trustworthy.
  for (int r = 0; r < size; ++r)
    if (all[r].op_seq != mine.op_seq)
      detail::throw_status(
          Status::kRuntimeError,
          detail::cat(op, "(rank ", rank, "): rank ", r, " is at its call #", all[r].op_seq,
                      " but rank ", rank, " at call #", mine.op_seq,
                      " (the ranks' calls went out of step; the communicator is unusable)"));
  // Different operators at the same call number: a rank made a call too many or skipped
  // one. Unlike different arguments to one operator, that stays so: the next calls would
  // pair one rank's call i with another's i + 1 and succeed with wrong data. Checked over
  // every rank before any argument, so that every rank reaches this verdict (where the
  // operators are not all alike, each rank has a peer whose operator differs from its own).
  // Before a peer's rejection: a rejection does not make calls that went out of step usable
  // (a rank's barrier against its peers' all_gather, one of which rejected its arguments, was
  // reported as the rejection, and the next calls ran paired one off). A rank that rejected
  // a plain collective sends no collective (an empty descriptor): it is left out here.
  const std::string ours = call_name(mine);
  for (int r = 0; r < size && known(mine); ++r)
    if (const std::string theirs = call_name(all[r]); known(all[r]) && theirs != ours)
      detail::throw_status(
          Status::kRuntimeError,
          detail::cat(op, "(rank ", rank, "): rank ", r, " called ", theirs, " but rank ", rank,
                      " called ", ours,
                      " (every rank must call the same operators in the same order; the "
                      "ranks' calls went out of step; the communicator is unusable)"));
  for (int r = 0; r < size; ++r)
    if (r != rank && all[r].rejected)
      throw CallFailed(detail::cat(me, "rank ", r,
                                   " rejected the call (no data was delivered; the "
                                   "communicator stays usable): ",
                                   all[r].reason));
  const CallSignature* sig = current_call();
  for (int r = 0; r < size; ++r) {
    const PeerCall& t = all[r];
    if (r == rank || same_call(mine, t)) continue;
    if (sig != nullptr && !(*t.sig == *mine.sig))
      for (int i = 0; i < sig->nfields; ++i)
        if (t.sig->values[i] != mine.sig->values[i])
          throw CallFailed(detail::cat(me, "rank ", r, " passed ", sig->labels[i], " ",
                                       value_str(*sig, i, t.sig->values[i]), ", rank ", rank,
                                       " passed ", value_str(*sig, i, mine.sig->values[i]),
                                       " (every rank must pass the same ", sig->labels[i], ")"));
    if (sig == nullptr) {  // a plain collective: the first of its arguments that differs
      const CollDesc &a = t.coll, &b = mine.coll;
      const struct {
        const char* what;
        std::string theirs, ours;
      } args[] = {{"count", std::to_string(a.count), std::to_string(b.count)},
                  {"dtype", dtype_or_number(static_cast<int64_t>(a.dtype)),
                   dtype_or_number(static_cast<int64_t>(b.dtype))},
                  {"root", std::to_string(a.root), std::to_string(b.root)},
                  {"piece size", std::to_string(a.piece), std::to_string(b.piece)}};
      for (const auto& f : args)
        if (f.theirs != f.ours)
          throw CallFailed(detail::cat(me, "rank ", r, " passed ", f.what, " ", f.theirs, ", rank ",
                                       rank, " passed ", f.ours, " (every rank must pass the same ",
                                       f.what, ")"));
    }
    // Equal arguments, different collectives: the ranks planned differently (environment).
    throw CallFailed(detail::cat(me, "rank ", r, " called ", describe(t.coll), ", rank ", rank,
                                 " called ", describe(mine.coll),
                                 " (the same arguments planned differently: set COMMFUSE_* "
                                 "alike on every rank)"));
  }
  CF_ASSERT(false);  // called although every descriptor matched
}

uint64_t bytes_digest(const void* data, size_t bytes) {
  using detail_digest::fmix;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {0x9e3779b97f4a7c15ull, 0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
                      0xa4093822299f31d0ull};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = fmix(lane[l], w);
    }
  uint64_t tail[4] = {};
  std::memcpy(tail, p + i, bytes - i);
  for (int l = 0; l < 4; ++l) lane[l] = fmix(lane[l], tail[l]);
  const uint64_t h = fmix(fmix(fmix(fmix(lane[0], bytes), lane[1]), lane[2]), lane[3]);
  return h != 0 ? h : 1;
}

}  // namespace commfuse::comm
