#include "kernels/cpu/onednn_info.hpp"

#include <oneapi/dnnl/dnnl.h>

#include "core/error.hpp"

namespace commfuse::kernels::cpu {

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                        : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                             : "threadpool/other";
  return detail::cat(v->major, ".", v->minor, ".", v->patch, " (cpu runtime ", runtime, ", hash ",
                     v->hash, ")");
}

}  // namespace commfuse::kernels::cpu
