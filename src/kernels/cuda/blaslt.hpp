// GEMMs on the GPU through cuBLASLt, loaded at run time (dlopen of libcublasLt.so.<CUDA
// major>): libcommfuse then loads where no CUDA is installed, as with OpenBLAS on the CPU.
// Row-major operands as the CPU's MatmulDesc has them: c (m x n) = a (m x k) @ b, b (k x n)
// or, transposed, stored (n x k). cuBLASLt is column-major, so the call computes
// c^T = b^T a^T: x2 becomes cuBLASLt's A and x1 its B.
//
// Types: bfloat16 / float16 -> float32 or the input type, float32 -> float32 (fp32
// arithmetic, no TF32), all with fp32 accumulation; int8 x int8 -> int32 (exact); fp8
// (e4m3fn, e5m2; sm_89+) -> float32 or bfloat16 with fp32 accumulation. cuBLASLt takes
// int8 and fp8 only in its "TN" form, which is b stored (n x k): other layouts are
// rejected "not supported".
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace commfuse::kernels::cuda {

struct GemmDesc {
  int64_t m = 0, k = 0, n = 0;
  DType ab_dtype = DType::kBFloat16;  // a's type; b's too except fp8 (b_dtype)
  DType b_dtype = DType::kBFloat16;
  DType c_dtype = DType::kFloat32;
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides in elements
  bool b_transposed = false;          // b stored (n x k)
};

// Empty when cuBLASLt can be used; else why not (not built, no device, library missing).
std::string blaslt_unavailable();
// "cuBLASLt 13.0.0 (libcublasLt.so.13)" or the reason it is unavailable.
std::string blaslt_describe();

// Bytes of workspace gemm() may use: cuBLASLt's kernels choose faster algorithms with it.
inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

// Empty when gemm() takes the descriptor on this machine; else why not (the argument rules
// gemm() throws PARAM_INVALID for, and fp8 on a device below compute capability 8.9): for
// callers that must refuse a call before it starts.
std::string gemm_unsupported(const GemmDesc& d);

// c = a @ b on `stream` (cudaStream_t). Throws PARAM_INVALID naming the argument for a bad
// or unsupported descriptor, RUNTIME_ERROR for a cuBLASLt or CUDA failure.
void gemm(const GemmDesc& d, const void* a, const void* b, void* c, void* workspace,
          size_t workspace_bytes, void* stream);

}  // namespace commfuse::kernels::cuda
