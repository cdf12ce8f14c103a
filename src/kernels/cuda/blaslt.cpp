#include "kernels/cuda/blaslt.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <mutex>

#include "core/error.hpp"
#include "core/shared_library.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

// The entry points used, resolved from the library at run time.
struct Api {
  std::string name, unavailable;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetVersion) version = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  cublasLtHandle_t handle = nullptr;
};

Api load() {
  Api api;
  if (!device_available()) {
    api.unavailable = detail::cat("no usable CUDA device: ", runtime_info().unavailable);
    return api;
  }
  // By soname (the loader's path and cache), then in the toolkit this was built with (an
  // install without ldconfig); never an unversioned name, which may be another major.
  const std::string soname = detail::cat("libcublasLt.so.", runtime_info().runtime_version / 1000);
  SharedLibrary lib{soname, detail::cat(COMMFUSE_CUDA_LIBDIR, "/", soname)};
  (void)(lib.resolve(api.create, "cublasLtCreate") &&
         lib.resolve(api.version, "cublasLtGetVersion") &&
         lib.resolve(api.desc_create, "cublasLtMatmulDescCreate") &&
         lib.resolve(api.desc_destroy, "cublasLtMatmulDescDestroy") &&
         lib.resolve(api.desc_set, "cublasLtMatmulDescSetAttribute") &&
         lib.resolve(api.layout_create, "cublasLtMatrixLayoutCreate") &&
         lib.resolve(api.layout_destroy, "cublasLtMatrixLayoutDestroy") &&
         lib.resolve(api.pref_create, "cublasLtMatmulPreferenceCreate") &&
         lib.resolve(api.pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
         lib.resolve(api.pref_set, "cublasLtMatmulPreferenceSetAttribute") &&
         lib.resolve(api.heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
         lib.resolve(api.matmul, "cublasLtMatmul"));
  if (lib.unavailable().empty() && api.create(&api.handle) != CUBLAS_STATUS_SUCCESS)
    lib.fail(detail::cat(lib.name(), ": cublasLtCreate failed"));
  api.name = lib.name();
  api.unavailable = lib.unavailable();
  return api;
}

Api& api() {
  static Api a = load();
  return a;
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    detail::throw_status(
        Status::kRuntimeError,
        detail::cat("gemm (cuBLASLt): ", what, " failed with status ", static_cast<int>(s)));
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kInt8:
      return CUDA_R_8I;
    case DType::kInt32:
      return CUDA_R_32I;
    case DType::kFloat8E4M3FN:
      return CUDA_R_8F_E4M3;
    case DType::kFloat8E5M2:
      return CUDA_R_8F_E5M2;
    default:
      CF_ASSERT(false && "gemm (cuBLASLt): no CUDA type");
  }
  return CUDA_R_32F;
}

bool is_fp8(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

// The type combinations cuBLASLt runs here; the message says what is accepted.
void validate(const GemmDesc& d) {
  const char* fn = "gemm (cuBLASLt)";
  CF_CHECK_ARG(d.m >= 0 && d.k > 0 && d.n > 0, fn, ": m=", d.m, " k=", d.k, " n=", d.n,
               " (m >= 0, k and n > 0)");
  const DType a = d.ab_dtype, c = d.c_dtype;
  bool ok = false;
  if (a == DType::kFloat32) ok = d.b_dtype == a && c == DType::kFloat32;
  if (a == DType::kBFloat16 || a == DType::kFloat16)
    ok = d.b_dtype == a && (c == DType::kFloat32 || c == a);
  if (a == DType::kInt8) ok = d.b_dtype == a && c == DType::kInt32;
  if (is_fp8(a))
    ok = is_fp8(d.b_dtype) && !(a == DType::kFloat8E5M2 && d.b_dtype == DType::kFloat8E5M2) &&
         (c == DType::kFloat32 || c == DType::kBFloat16);
  CF_CHECK_ARG(ok, fn, ": not supported: ", dtype_name(a), " x ", dtype_name(d.b_dtype), " -> ",
               dtype_name(c),
               " (accepted: float32 -> float32; bfloat16 or float16 -> float32 or the same; int8 "
               "-> int32; float8 e4m3fn/e5m2 (not both e5m2) -> float32 or bfloat16)");
  CF_CHECK_ARG(!(a == DType::kInt8 || is_fp8(a)) || d.b_transposed, fn,
               ": not supported: ", dtype_name(a),
               " GEMMs run on cuBLASLt's TN kernels only, which need x2 stored (n, k) (a "
               "transposed view)");
  CF_CHECK_ARG(d.lda >= d.k, fn, ": lda=", d.lda, " is below k=", d.k);
  CF_CHECK_ARG(d.ldb >= (d.b_transposed ? d.k : d.n), fn, ": ldb=", d.ldb, " is too small");
  CF_CHECK_ARG(d.ldc >= d.n, fn, ": ldc=", d.ldc, " is below n=", d.n);
  // cuBLASLt's documented limits for its integer (IMMA) and fp8 kernels.
  if (a == DType::kInt8)
    CF_CHECK_ARG(d.k % 4 == 0 && d.n % 4 == 0 && d.lda % 4 == 0 && d.ldb % 4 == 0 && d.ldc % 4 == 0,
                 fn,
                 ": not supported: int8 GEMMs need k, n, lda, ldb and ldc multiples of 4 (k=", d.k,
                 " n=", d.n, ")");
  if (is_fp8(a))
    CF_CHECK_ARG(d.k % 16 == 0 && d.lda % 16 == 0 && d.ldb % 16 == 0, fn,
                 ": not supported: fp8 GEMMs need k, lda and ldb multiples of 16 (k=", d.k, ")");
}

// The largest power of two up to 256 dividing the address: cuBLASLt otherwise assumes 256
// and may pick a kernel that faults on a row block's pointer.
uint32_t alignment_of(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

// RAII for the descriptors of one call.
struct Call {
  Api& a;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Call() {
    if (pref) a.pref_destroy(pref);
    if (lc) a.layout_destroy(lc);
    if (lb) a.layout_destroy(lb);
    if (la) a.layout_destroy(la);
    if (op) a.desc_destroy(op);
  }
};

}  // namespace

std::string blaslt_unavailable() {
  return api().unavailable;
}

std::string blaslt_describe() {
  Api& a = api();
  if (!a.unavailable.empty()) return a.unavailable;
  const size_t v = a.version();
  return detail::cat("cuBLASLt ", v / 10000, ".", (v / 100) % 100, ".", v % 100, " (", a.name, ")");
}

std::string gemm_unsupported(const GemmDesc& d) {
  try {
    validate(d);
  } catch (const Error& e) {
    return e.what();
  }
  if (is_fp8(d.ab_dtype)) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (major * 10 + minor < 89)
      return detail::cat(
          "gemm (cuBLASLt): not supported: fp8 GEMMs need compute capability 8.9 "
          "or newer (cuda:",
          dev, " is ", major, ".", minor, ")");
  }
  return {};
}

void gemm(const GemmDesc& d, const void* a_ptr, const void* b_ptr, void* c_ptr, void* workspace,
          size_t workspace_bytes, void* stream) {
  validate(d);
  CF_CHECK_ARG(workspace != nullptr || workspace_bytes == 0,
               "gemm (cuBLASLt): workspace is null with workspace_bytes=", workspace_bytes);
  if (d.m == 0) return;
  Api& a = api();
  if (!a.unavailable.empty())
    detail::throw_status(Status::kRuntimeError, detail::cat("gemm (cuBLASLt): ", a.unavailable));
  static std::mutex mu;  // the handle is shared; descriptors are per call
  std::lock_guard<std::mutex> lock(mu);
  Call call{a};
  const bool integer = d.ab_dtype == DType::kInt8;
  const cublasComputeType_t compute = integer ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale = integer ? CUDA_R_32I : CUDA_R_32F;
  check(a.desc_create(&call.op, compute, scale), "cublasLtMatmulDescCreate");
  // Column-major view: cuBLASLt's A is x2 (n x k after op), its B is x1^T (k x m).
  const cublasOperation_t ta = d.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  check(a.desc_set(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check(a.desc_set(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  // Stored shapes, column-major (rows x cols, ld): x2 row-major (k, n) is (n x k); x2
  // stored (n, k) row-major is (k x n), transposed by TRANSA; x1 row-major (m, k) is (k x m).
  if (d.b_transposed)
    check(a.layout_create(&call.la, cuda_type(d.b_dtype), u(d.k), u(d.n), d.ldb), "layout A");
  else
    check(a.layout_create(&call.la, cuda_type(d.b_dtype), u(d.n), u(d.k), d.ldb), "layout A");
  check(a.layout_create(&call.lb, cuda_type(d.ab_dtype), u(d.k), u(d.m), d.lda), "layout B");
  check(a.layout_create(&call.lc, cuda_type(d.c_dtype), u(d.n), u(d.m), d.ldc), "layout C");
  check(a.pref_create(&call.pref), "cublasLtMatmulPreferenceCreate");
  check(a.pref_set(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                   sizeof workspace_bytes),
        "workspace preference");
  // Split-K partial sums only in the compute type (fp32): reducing them in a 16-bit output
  // type would round more than once (SPEC §0: one rounding at the end).
  const uint32_t reduction =
      CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  check(a.pref_set(call.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction,
                   sizeof reduction),
        "reduction preference");
  // cuBLASLt's A is x2, its B x1, its C and D the output.
  const uint32_t align[4] = {alignment_of(b_ptr), alignment_of(a_ptr), alignment_of(c_ptr),
                             alignment_of(c_ptr)};
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    check(a.pref_set(call.pref, align_attr[i], &align[i], sizeof align[i]), "alignment preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t hs = a.heuristic(a.handle, call.op, call.la, call.lb, call.lc, call.lc,
                                        call.pref, 1, &result, &found);
  if (hs != CUBLAS_STATUS_NOT_SUPPORTED) check(hs, "cublasLtMatmulAlgoGetHeuristic");
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || found == 0)
    detail::throw_status(Status::kRuntimeError,
                         detail::cat("gemm (cuBLASLt): no algorithm for ", dtype_name(d.ab_dtype),
                                     " m=", d.m, " k=", d.k, " n=", d.n,
                                     " (alignment: leading dimensions and pointers should "
                                     "be multiples of 16 bytes)"));
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const int32_t alpha_i = 1, beta_i = 0;
  const void* alpha = integer ? static_cast<const void*>(&alpha_i) : &alpha_f;
  const void* beta = integer ? static_cast<const void*>(&beta_i) : &beta_f;
  check(a.matmul(a.handle, call.op, alpha, b_ptr, call.la, a_ptr, call.lb, beta, c_ptr, call.lc,
                 c_ptr, call.lc, &result.algo, workspace, workspace_bytes,
                 static_cast<cudaStream_t>(stream)),
        "cublasLtMatmul");
}

}  // namespace commfuse::kernels::cuda
