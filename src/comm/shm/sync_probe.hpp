// How long one synchronization between two ranks takes on this machine: rank 0 and rank 1
// bounce a counter through their own shared segments (each spins on the other's word, as a
// published step is waited for), before the transport uses the slots. The CMA crossover
// weighs this against the copies CMA saves (comm/shm/cma.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/shm/segment.hpp"

namespace commfuse::comm::shm {

// Called by every rank right after mapping every segment, before the slots carry data.
// Ranks 0 and 1 take part (others return at once); rank 0 returns half the best round trip
// in microseconds over a few runs, or a negative value when no run finished in time (rank
// 1 late or sharing rank 0's core): the caller then falls back to an estimate. Bounded: at
// most about 50 ms on rank 0 and 100 ms on rank 1, whatever the peer does.
double measure_rank_sync_us(int rank, const std::vector<Segment>& segments);

}  // namespace commfuse::comm::shm
