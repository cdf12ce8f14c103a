// Algorithm lists (DESIGN "Algorithm lists, chosen per machine"; oneDNN's impl_list): each
// operator lists its algorithms best first, with the unfused composition (the collective,
// then the same kernels) last as the reference. Each entry says whether it applies to the
// descriptor and, if not, why; an entry may also apply but not be preferred on this
// descriptor (a performance rule, with its reason). The choice is the first entry that
// applies and is not objected to (else the first that applies) unless
// COMMFUSE_ALGO=<op>:<name> forces one; COMMFUSE_VERBOSE=1 prints one line per decision.
//
// Every rank must choose the same algorithm (they run different collectives otherwise), so
// applicability depends only on what every rank of the group knows alike: the descriptor,
// the world size, the transport (with the timings one rank took and sent every rank at
// set-up: the CMA crossover, the shared-cores probes, the few-rows GEMM verdicts) and the CPU
// ISA level — never on a timing taken by this process alone. COMMFUSE_ALGO must be the same on
// every rank (a mismatch is reported by the transport as a mismatched collective, not a hang).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace commfuse {

struct AlgorithmEntry {
  const char* name;
  std::string not_applicable;  // empty: applies; else why not (one phrase)
  // Applies, but the machine model prefers a later entry here (why; empty: no objection).
  // COMMFUSE_ALGO may still force it.
  std::string not_preferred = {};
};

// The index of the chosen entry. Throws InvalidArgument naming COMMFUSE_ALGO when it forces
// a name this op does not have, or one that does not apply here (with the reason).
// `what`: the op, rank and shape, for the decision line.
// `what` is called only when a line or an error needs it (building it costs more than a
// tiny op's plan).
size_t choose_algorithm(const char* op, const std::function<std::string()>& what,
                        const std::vector<AlgorithmEntry>& list);

// The name COMMFUSE_ALGO forces for op ("" when none); InvalidArgument for a malformed value.
std::string forced_algorithm(std::string_view op);

// The operators and collectives that have an algorithm list: COMMFUSE_ALGO may name only
// these, as "<op>:<name>" (a new list's op goes here too, or forcing it is refused at init).
std::span<const std::string_view> algorithm_ops();

// COMMFUSE_ALGO as a whole, checked where a communicator is created (on every rank, before
// the group forms, so that a bad value fails every rank): InvalidArgument naming it for a
// malformed item, an op not in algorithm_ops() (a typo, "allreduce", was silently ignored),
// or one op forced to two different names. Whether the name is one of the op's algorithms
// is checked where it is chosen, with the op's list (shm's collectives: check_shm_algorithms).
void check_forced_algorithms();

}  // namespace commfuse
