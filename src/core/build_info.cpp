#include "core/build_info.hpp"

#include <commfuse/commfuse.h>

#include "core/error.hpp"

namespace commfuse::build {

std::string version() {
  return detail::cat(COMMFUSE_VERSION_MAJOR, ".", COMMFUSE_VERSION_MINOR, ".",
                     COMMFUSE_VERSION_PATCH);
}
std::string build_type() {
  return COMMFUSE_BUILD_TYPE;
}
std::string compiler() {
#if defined(__clang__)
  return detail::cat("clang ", __clang_major__, ".", __clang_minor__);
#elif defined(__GNUC__)
  return detail::cat("g++ ", __GNUC__, ".", __GNUC_MINOR__, ".", __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}
bool have_mpi() {
  return COMMFUSE_HAVE_MPI != 0;
}
bool have_cuda() {
  return COMMFUSE_HAVE_CUDA != 0;
}
bool sanitized() {
  return COMMFUSE_SANITIZED != 0;
}

}  // namespace commfuse::build

namespace commfuse {
const char* version() noexcept {
  static const std::string v = build::version();
  return v.c_str();
}
}  // namespace commfuse
