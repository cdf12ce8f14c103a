// Test cases of the operator multi-rank binary (ops_rank_main.cpp runs them by name).
#pragma once

#include <commfuse/commfuse.hpp>

#include <optional>

#include "op_test_util.hpp"

namespace optest {

int case_numerics(commfuse::Comm& comm);  // numerics.cpp
// quant_matmul_numerics.cpp: SPEC §6 quantized mode (A8W8, FP8, HiF8) of the three ops,
// called from case_numerics
void check_quant_all_gather_matmul(commfuse::Comm& comm, uint64_t& tag);
int case_c_api(commfuse::Comm& comm);        // c_api.cpp: C entry points agree with C++
int case_reject(commfuse::Comm& comm);       // reject.cpp: every SPEC §2 rule, C++ and C
int case_reject_peer(commfuse::Comm& comm);  // reject.cpp: rank 1 wrong, others not hung

// alltoall_cases.cpp / alltoall_reject.cpp (SPEC §3)
int case_alltoall_numerics(commfuse::Comm& comm);
int case_alltoall_reject(commfuse::Comm& comm);
int case_device_reject(commfuse::Comm& comm);    // device_reject.cpp: device tensors' checks
int case_device_numerics(commfuse::Comm& comm);  // device_numerics.cpp: host vs CUDA, bitwise
int case_recover(commfuse::Comm& comm);  // recover.cpp: a rejected call never kills the group
int case_fault(commfuse::Comm& comm);    // recover.cpp: COMMFUSE_FAULT kills a rank mid-op
// soak.cpp: COMMFUSE_SOAK_OPS mixed calls, RSS and /dev/shm flat
int case_soak(commfuse::Comm& comm);

}  // namespace optest
