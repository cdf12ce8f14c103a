#include "comm/fault.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/call_check.hpp"
#include "core/error.hpp"
#include "core/params.hpp"

namespace commfuse::comm {
namespace {

enum class Action { kNone, kKill, kStall, kExit };

struct Fault {
  Action action = Action::kNone;
  int rank = -1;
  std::string op;
  uint64_t piece = 0;
};

// "<rank>:<op>:<piece>:<action>"; a malformed value is an error of the first op that
// reaches a fault point (InvalidArgument naming the variable), never silently ignored.
Fault parse(const std::string& v) {
  Fault f;
  if (v.empty()) return f;
  const size_t a = v.find(':'), b = v.find(':', a + 1), c = v.find(':', b + 1);
  auto bad = [&] {
    detail::throw_status(
        Status::kParamInvalid,
        detail::cat("COMMFUSE_FAULT='", v, "' must be <rank>:<op>:<piece>:<kill|stall|exit>"));
  };
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos) bad();
  try {
    f.rank = std::stoi(v.substr(0, a));
    f.piece = std::stoull(v.substr(b + 1, c - b - 1));
  } catch (const std::exception&) {
    bad();
  }
  f.op = v.substr(a + 1, b - a - 1);
  const std::string act = v.substr(c + 1);
  f.action = act == "kill"    ? Action::kKill
             : act == "stall" ? Action::kStall
             : act == "exit"  ? Action::kExit
                              : Action::kNone;
  if (f.action == Action::kNone || f.op.empty() || f.rank < 0) bad();
  return f;
}

const Fault& configured() {
  static const Fault f = parse(params::get_string("COMMFUSE_FAULT"));
  return f;
}

}  // namespace

void check_fault_param() {
  configured();
}

void fault_point(int rank, const char* collective, uint64_t piece) {
  const Fault& f = configured();
  if (f.action == Action::kNone || f.rank != rank || f.piece != piece) return;
  const CallSignature* call = current_call();
  if (f.op != (call != nullptr ? call->op : collective)) return;
  std::fprintf(stderr, "COMMFUSE_FAULT: rank %d %s at %s piece %llu\n", rank,
               f.action == Action::kKill    ? "kills itself"
               : f.action == Action::kStall ? "stalls"
                                            : "exits with code 3",
               f.op.c_str(), static_cast<unsigned long long>(piece));
  std::fflush(stderr);
  switch (f.action) {
    case Action::kKill:
      raise(SIGKILL);
      break;
    case Action::kStall:
      for (;;) pause();  // until a launcher (or the test) stops this process
    case Action::kExit:
      // _exit, not exit: static destructors racing with this rank's other threads (oneDNN's,
      // MPI's progress thread) could turn the exit into a crash, and under ASan the leak
      // check at exit would change the code. A process that ends with code 3, as
      // os._exit(3) or a dying interpreter does.
      std::fflush(nullptr);
      _exit(3);
    case Action::kNone:
      break;
  }
}

}  // namespace commfuse::comm
