// The one table of run-time parameters (NCCL's param registry habit): every COMMFUSE_*
// environment variable is declared here with its type, default and description, and
// `commfuse info` prints them all.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace commfuse::params {

enum class Kind { kInt, kString, kChoice };

struct Param {
  std::string_view env;  // environment variable
  Kind kind;
  std::string_view default_value;
  std::string_view choices;      // kChoice: '|'-separated allowed values
  std::string_view description;  // one line
};

std::span<const Param> all();

// Current value of a parameter (environment or default), validated. An invalid value
// throws InvalidArgument naming the variable, the value and what is allowed.
std::string get_string(std::string_view env);
int64_t get_int(std::string_view env);

// The parameter's value checked as its users would (its kind; the ranges of COMMFUSE_TIMEOUT_S,
// COMMFUSE_NUM_THREADS, COMMFUSE_VERBOSE and COMMFUSE_SHM_SLOT_BYTES): InvalidArgument naming
// it. What `commfuse info` marks INVALID, and what a communicator checks for every parameter
// at creation (comm_impl.hpp, check_comm_params).
void check(std::string_view env);
// COMMFUSE_SHM_SLOT_BYTES, checked.
size_t shm_slot_bytes();

// Readers for the parameters used across layers.
int timeout_seconds();       // COMMFUSE_TIMEOUT_S
int num_threads_override();  // COMMFUSE_NUM_THREADS (0 = automatic)
// A kernel choice made by a once-per-process timing (COMMFUSE_F32_GEMM, COMMFUSE_HALF_GEMM):
// the variable's value, except that "auto" becomes `fixed` under COMMFUSE_DETERMINISTIC=1.
// A timing near a crossover can pick the other kernel on a rerun, and the kernels sum k in
// different orders: pinned, a rerun gives the same bits (SPEC §0).
std::string kernel_pin(std::string_view env, const char* fixed);

}  // namespace commfuse::params
