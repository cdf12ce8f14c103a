// Fault injection for the reliability tests (COMMFUSE_FAULT=<rank>:<op>:<piece>:<action>):
// one rank dies (kill: SIGKILL), hangs (stall: sleeps until killed) or exits (exit: _exit(3))
// at a chosen piece of a chosen operator, so tests can check that every other rank fails
// within COMMFUSE_TIMEOUT_S naming it, and that the launchers report it. <op> is the
// operator the user called (all_gather_matmul, quant_all_reduce, ...) or, outside any
// operator, the collective (all_reduce, ...); <piece> counts the pieces (streams) or steps
// (collectives) of each collective from 0. Unset: one branch per piece.
#pragma once

#include <cstdint>

namespace commfuse::comm {

// Called by the transports before this rank publishes piece `piece` of `collective`.
void fault_point(int rank, const char* collective, uint64_t piece);
// COMMFUSE_FAULT parsed: InvalidArgument naming it when malformed (checked at creation).
void check_fault_param();

}  // namespace commfuse::comm
