// The CUDA backend's entry points in a build without it (COMMFUSE_CUDA=OFF, no nvcc, or a
// sanitizer build): each says so with PARAM_INVALID "not supported" instead of being absent, so
// callers and `commfuse info` need no #if.
#include "core/error.hpp"
#include "kernels/cuda/blaslt.hpp"
#include "kernels/cuda/epilogue.hpp"
#include "kernels/cuda/permute_quant.hpp"
#include "kernels/cuda/quant_reduce.hpp"
#include "kernels/cuda/runtime_info.hpp"

namespace commfuse::kernels::cuda {
namespace {

constexpr const char* kWhy =
    "this commfuse was built without CUDA (COMMFUSE_CUDA=OFF, no nvcc at build time, or a "
    "sanitizer build)";

}  // namespace

const RuntimeInfo& runtime_info() {
  static const RuntimeInfo info = [] {
    RuntimeInfo i;
    i.unavailable = kWhy;
    return i;
  }();
  return info;
}

void require_device(const char* what) {
  detail::throw_status(Status::kParamInvalid, detail::cat(what, ": not supported: ", kWhy));
}

std::string version_string(int v) {
  return detail::cat(v / 1000, ".", (v % 1000) / 10);
}

void dequant_sum(const DequantSumDesc&, void*) {
  require_device("dequant_sum (CUDA)");
}

void quant_epilogue(const EpilogueDesc&, void*) {
  require_device("quant_epilogue (CUDA)");
}

void token_epilogue(const TokenEpilogueDesc&, void*) {
  require_device("token_epilogue (CUDA)");
}

void permute_quant(const PermuteQuantDesc&, void*) {
  require_device("permute_quant (CUDA)");
}

std::string blaslt_unavailable() {
  return kWhy;
}

std::string blaslt_describe() {
  return kWhy;
}

std::string gemm_unsupported(const GemmDesc&) {
  return kWhy;
}

void gemm(const GemmDesc&, const void*, const void*, void*, void*, size_t, void*) {
  require_device("gemm (cuBLASLt)");
}

}  // namespace commfuse::kernels::cuda
