// What this build of commfuse contains, for `commfuse info` and bug reports.
#pragma once

#include <string>

namespace commfuse::build {

std::string version();
std::string build_type();
std::string compiler();
bool have_mpi();
bool have_cuda();
bool sanitized();

}  // namespace commfuse::build
