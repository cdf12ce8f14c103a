#pragma once
#include <string>
namespace commfuse::kernels::cpu {
// "2.6.3 (cpu runtime: OpenMP, hash ...)" of the oneDNN the process loaded.
std::string onednn_version();
}  // namespace commfuse::kernels::cpu
