#include "kernels/cpu/openblas.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/cpu_features.hpp"
#include "core/error.hpp"

namespace commfuse::kernels::cpu {
namespace {

// CBLAS's enum values (cblas.h), so that no BLAS header is needed.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using SgemmFn = void (*)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float* a, int lda, const float* b, int ldb, float beta, float* c,
                         int ldc);
using SetThreadsFn = void (*)(int);
using ConfigFn = char* (*)();

struct Library {
  SgemmFn sgemm = nullptr;
  SetThreadsFn set_threads = nullptr;
  std::string unavailable;
  std::string config;
  std::atomic<int> threads{-1};  // what set_threads was last given
};

Library& library() {
  static Library* const lib = [] {
    auto* l = new Library;  // never unloaded: threads of OpenBLAS's pool may outlive main
    // COMMFUSE_MAX_CPU_ISA below AVX-512 holds OpenBLAS to the matching kernels too (it picks
    // them when loaded, from OPENBLAS_CORETYPE), so a capped run times and tests what an
    // older CPU runs. A user's own OPENBLAS_CORETYPE wins.
    const char* coretype = commfuse::cpu::max_isa() < commfuse::cpu::IsaLevel::kAvx2 ? "Nehalem"
                           : commfuse::cpu::max_isa() < commfuse::cpu::IsaLevel::kAvx512Core
                               ? "Haswell"
                               : nullptr;
    if (coretype != nullptr) setenv("OPENBLAS_CORETYPE", coretype, /*overwrite=*/0);
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      l->unavailable = detail::cat("libopenblas.so.0 not loadable (", e ? e : "?",
                                   "; Debian: libopenblas0-pthread)");
      return l;
    }
    l->sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    l->set_threads = reinterpret_cast<SetThreadsFn>(dlsym(h, "openblas_set_num_threads"));
    auto config = reinterpret_cast<ConfigFn>(dlsym(h, "openblas_get_config"));
    if (l->sgemm == nullptr || l->set_threads == nullptr) {
      l->sgemm = nullptr;
      l->unavailable = "libopenblas.so.0 lacks cblas_sgemm or openblas_set_num_threads";
      return l;
    }
    l->config = detail::cat(config ? config() : "OpenBLAS", " (libopenblas.so.0)");
    return l;
  }();
  return *lib;
}

}  // namespace

bool openblas_available() {
  return library().sgemm != nullptr;
}

const std::string& openblas_unavailable() {
  return library().unavailable;
}

const std::string& openblas_config() {
  return library().config;
}

void openblas_sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                    int64_t ldb, bool b_transposed, const float* bias, float* c, int64_t ldc,
                    bool accumulate, int threads) {
  Library& l = library();
  CF_ASSERT(l.sgemm != nullptr);
  // The plans keep every dimension and stride within 32 bits (matmul.hpp:
  // kMaxCallElements, kMaxWeightElements).
  CF_ASSERT(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX &&
            ldb <= INT32_MAX && ldc <= INT32_MAX);
  // Process-wide in OpenBLAS; every caller of one process asks for the same count.
  if (l.threads.exchange(threads, std::memory_order_relaxed) != threads) l.set_threads(threads);
  l.sgemm(kRowMajor, kNoTrans, b_transposed ? kTrans : kNoTrans, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
          static_cast<int>(ldb), accumulate ? 1.0f : 0.0f, c, static_cast<int>(ldc));
  // The bias after the product, in fp32, as oneDNN adds it to its fp32 accumulator.
  if (bias != nullptr)
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
}

}  // namespace commfuse::kernels::cpu
