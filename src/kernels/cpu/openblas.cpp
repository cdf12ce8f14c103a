#include "kernels/cpu/openblas.hpp"

#include <dlfcn.h>

#include <mutex>
#include <vector>

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
using GetThreadsFn = int (*)();
using ConfigFn = char* (*)();

struct Library {
  SgemmFn sgemm = nullptr;
  SetThreadsFn set_threads = nullptr;
  GetThreadsFn get_threads = nullptr;
  std::string unavailable;
  std::string config;
  // OpenBLAS's thread count is one setting for its whole process: every call sets its own
  // and restores the one it found (a host using the same library keeps its setting), under
  // this lock so that no call changes it under another's running sgemm.
  std::mutex mu;
};

Library& library() {
  static Library* const lib = [] {
    auto* l = new Library;  // never unloaded: threads of OpenBLAS's pool may outlive main
    // OpenBLAS picks its kernels from the CPU when loaded (only OPENBLAS_CORETYPE, read at
    // load, overrides that, and setting the environment is not safe beside other threads):
    // under a COMMFUSE_MAX_CPU_ISA cap below AVX-512 it would run kernels the cap excludes,
    // so a capped process multiplies fp32 on oneDNN, which the cap holds.
    if (const commfuse::cpu::IsaLevel cap = commfuse::cpu::max_isa();
        cap < commfuse::cpu::IsaLevel::kAvx512Core) {
      l->unavailable = detail::cat("COMMFUSE_MAX_CPU_ISA=", commfuse::cpu::isa_level_name(cap),
                                   ": OpenBLAS's kernels cannot be held to the cap");
      return l;
    }
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      l->unavailable = detail::cat("libopenblas.so.0 not loadable (", e ? e : "?",
                                   "; Debian: libopenblas0-pthread)");
      return l;
    }
    l->sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    l->set_threads = reinterpret_cast<SetThreadsFn>(dlsym(h, "openblas_set_num_threads"));
    l->get_threads = reinterpret_cast<GetThreadsFn>(dlsym(h, "openblas_get_num_threads"));
    auto config = reinterpret_cast<ConfigFn>(dlsym(h, "openblas_get_config"));
    if (l->sgemm == nullptr || l->set_threads == nullptr || l->get_threads == nullptr) {
      l->sgemm = nullptr;
      l->unavailable = "libopenblas.so.0 lacks cblas_sgemm or openblas_set/get_num_threads";
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
  const int ldc32 = static_cast<int>(ldc);
  auto sgemm = [&](float* out, int ld, float beta) {
    l.sgemm(kRowMajor, kNoTrans, b_transposed ? kTrans : kNoTrans, static_cast<int>(m),
            static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
            static_cast<int>(ldb), beta, out, ld);
  };
  auto add_rows = [&](float* dst, int64_t ld_dst, const float* add, int64_t ld_add, bool per_row) {
    for (int64_t i = 0; i < m; ++i) {
      float* row = dst + i * ld_dst;
      const float* x = per_row ? add + i * ld_add : add;
      for (int64_t j = 0; j < n; ++j) row[j] += x[j];
    }
  };
  {
    std::lock_guard<std::mutex> lock(l.mu);
    const int found = l.get_threads();
    if (found != threads) l.set_threads(threads);
    if (accumulate && bias != nullptr) {
      // c += (a @ b + bias), the order oneDNN's sum post-op gives: the product and its bias
      // first, in scratch of this thread.
      thread_local std::vector<float> tmp;
      tmp.resize(static_cast<size_t>(m * n));
      sgemm(tmp.data(), static_cast<int>(n), 0.0f);
      add_rows(tmp.data(), n, bias, 0, false);
      add_rows(c, ldc, tmp.data(), n, true);
    } else {
      // c (+)= a @ b, then the bias in fp32, as oneDNN adds it to its fp32 accumulator.
      sgemm(c, ldc32, accumulate ? 1.0f : 0.0f);
      if (bias != nullptr) add_rows(c, ldc, bias, 0, false);
    }
    if (found != threads) l.set_threads(found);
  }
}

}  // namespace commfuse::kernels::cpu
