#include "ops/cuda/schedule_steps.hpp"

#include "core/error.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/sum_rows.hpp"

namespace commfuse::ops::cuda {

namespace kc = kernels::cuda;

void check(cudaError_t e, int rank, const char* what) {
  kc::check_cuda(e, what, "CUDA schedule (rank ", rank, ")");
}

void copy(void* dst, const void* src, size_t bytes, void* stream, int rank) {
  check(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
      rank, "cudaMemcpyAsync");
}

void add_bias_round(const float* acc, int64_t rows, int64_t n, const void* bias, DType bias_dtype,
                    DType out_dtype, void* out, void* stream) {
  kc::SumRowsDesc e;
  e.parts = 1;
  e.part = &acc;
  e.ld_part = n;
  e.rows = rows;
  e.n = n;
  e.bias = bias;
  e.bias_dtype = bias_dtype;
  e.out_dtype = out_dtype;
  e.out = out;
  e.ld_out = n;
  kc::sum_bias_round(e, stream);
}

}  // namespace commfuse::ops::cuda
