// Test cases of QuantAllReduce / QuantReduceScatter (SPEC §4), run by quant_rank_main.cpp.
#pragma once

#include <commfuse/commfuse.hpp>

#include "op_test_util.hpp"

namespace optest {

int case_quant_numerics(commfuse::Comm& comm);     // quant_numerics.cpp: every combination
int case_quant_c_api(commfuse::Comm& comm);        // quant_numerics.cpp: C API == C++
int case_quant_reject(commfuse::Comm& comm);       // quant_reject.cpp: every rule, C++ and C
int case_quant_reject_peer(commfuse::Comm& comm);  // quant_reject.cpp: rank 1 wrong

}  // namespace optest
