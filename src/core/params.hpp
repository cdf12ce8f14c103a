// The one table of run-time parameters (NCCL's param registry habit): every COMMFUSE_*
// environment variable is declared here with its type, default and description, and
// `commfuse info` prints them all.
#pragma once

#include <cstdint>
#include <limits>
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
  // kInt: the allowed values, checked by every reader (get_int) and shown by `commfuse info`.
  int64_t min = 0;
  int64_t max = std::numeric_limits<int64_t>::max();
  int64_t multiple = 1;
};

std::span<const Param> all();

// Current value of a parameter (environment or default), validated against its kind, choices
// and range. An invalid value throws InvalidArgument naming the variable, the value and what
// is allowed.
std::string get_string(std::string_view env);
int64_t get_int(std::string_view env);

// The parameter's value checked as get_string/get_int would: InvalidArgument naming it. What
// the values' meanings add (an ALGO's names, a TRACE path) is checked in comm (check_param).
void check(std::string_view env);
// A kInt parameter's allowed values in words, e.g. "in [1, 86400]", "a multiple of 64 in [4096,
// 1073741824]"; empty for a parameter whose only bound is >= 0.
std::string range_text(const Param& p);

size_t shm_slot_bytes();  // COMMFUSE_SHM_SLOT_BYTES

// Readers for the parameters used across layers.
int timeout_seconds();       // COMMFUSE_TIMEOUT_S
int num_threads_override();  // COMMFUSE_NUM_THREADS (0 = automatic)
// A kernel choice made by a once-per-process timing (COMMFUSE_F32_GEMM, COMMFUSE_HALF_GEMM):
// the variable's value, except that "auto" becomes `fixed` under COMMFUSE_DETERMINISTIC=1.
// A timing near a crossover can pick the other kernel on a rerun, and the kernels sum k in
// different orders: pinned, a rerun gives the same bits (SPEC §0).
std::string kernel_pin(std::string_view env, const char* fixed);

}  // namespace commfuse::params
