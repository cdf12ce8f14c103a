// quantize / dequantize mode "per_token" (SPEC §5, as in §3): one fp32 scale per row,
// scale = amax / Q with Q = 127 (int8) or 7 (int4), codes round-half-even and clamped to
// [-Q, Q] — the quantizer alltoall_quant_matmul applies (kernels/cpu/quant_per_token.hpp),
// so a row quantized here matches the op's bits. int4 codes are packed two per byte along
// the last dim (SPEC §1), so H must be even. A row with amax 0 gets zeros and scale 0.
#include "ops/quantize/per_token.hpp"

#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/dequant.hpp"
#include "kernels/cpu/quant_per_token.hpp"

namespace commfuse::ops {
namespace {

struct RowLayout {
  int64_t rows = 0, h = 0;
  int qmax = 127;
};

RowLayout check_per_token(const char* fn, const char* fname, const TensorView& f,
                          const TensorView& q, const TensorView& scales) {
  CF_CHECK_ARG(
      f.dtype == DType::kFloat32 || f.dtype == DType::kFloat16 || f.dtype == DType::kBFloat16, fn,
      ": ", fname, " dtype is ", dtype_name(f.dtype), " but must be float32, float16 or bfloat16");
  CF_CHECK_ARG(f.ndim >= 2, fn, ": ", fname, " has ", f.ndim,
               " dims but mode per_token takes (rows, H) or (b, s, H)");
  CF_CHECK_ARG(q.dtype == DType::kInt8 || q.dtype == DType::kInt4, fn, ": q dtype is ",
               dtype_name(q.dtype), " but mode per_token takes int8 or int4");
  RowLayout l;
  l.h = f.shape[f.ndim - 1];
  // Before q's shape: a q made for an odd H cannot match it either, and this is the cause.
  CF_CHECK_ARG(q.dtype != DType::kInt4 || l.h % 2 == 0, fn, ": ", fname, " dim ", f.ndim - 1,
               " (H) is ", l.h, " but int4 codes are packed in pairs along it: H must be even");
  bool same = q.ndim == f.ndim;
  for (int i = 0; same && i < f.ndim; ++i) same = q.shape[i] == f.shape[i];
  CF_CHECK_ARG(same, fn, ": q shape does not match ", fname, "'s (must be equal)");
  l.rows = f.numel() / l.h;
  l.qmax = q.dtype == DType::kInt8 ? kernels::cpu::kInt8QuantMax : kernels::cpu::kInt4QuantMax;
  CF_CHECK_ARG(scales.dtype == DType::kFloat32, fn, ": scales dtype is ", dtype_name(scales.dtype),
               " but mode per_token uses float32");
  bool ok = scales.ndim == f.ndim - 1;
  for (int i = 0; ok && i < f.ndim - 1; ++i) ok = scales.shape[i] == f.shape[i];
  CF_CHECK_ARG(ok, fn, ": scales must have ", fname,
               "'s leading dims (one scale per row) in mode per_token");
  return l;
}

}  // namespace

void quantize_per_token(const char* fn, const TensorView& x, const TensorView& q,
                        const TensorView& scales) {
  const RowLayout l = check_per_token(fn, "x", x, q, scales);
  const size_t h = static_cast<size_t>(l.h);
  const size_t xes = static_cast<size_t>(dtype_bits(x.dtype) / 8);
  std::vector<float> v(h);
  std::vector<int8_t> codes(h);
  for (int64_t r = 0; r < l.rows; ++r) {
    convert(static_cast<const uint8_t*>(x.data) + static_cast<size_t>(r) * h * xes, x.dtype,
            v.data(), DType::kFloat32, h);
    static_cast<float*>(scales.data)[r] =
        kernels::cpu::quantize_row_per_token(v.data(), h, l.qmax, codes.data());
    if (q.dtype == DType::kInt8)
      std::copy(codes.begin(), codes.end(), static_cast<int8_t*>(q.data) + r * l.h);
    else
      pack_int4(codes.data(), static_cast<uint8_t*>(q.data) + r * l.h / 2, h);
  }
}

void dequantize_per_token(const char* fn, const TensorView& q, const TensorView& scales,
                          const TensorView& output) {
  const RowLayout l = check_per_token(fn, "output", output, q, scales);
  const size_t h = static_cast<size_t>(l.h);
  const size_t oes = static_cast<size_t>(dtype_bits(output.dtype) / 8);
  std::vector<int8_t> codes(h);
  std::vector<float> v(h);
  for (int64_t r = 0; r < l.rows; ++r) {
    const int8_t* c = static_cast<const int8_t*>(q.data) + r * l.h;
    if (q.dtype == DType::kInt4) {
      unpack_int4(static_cast<const uint8_t*>(q.data) + r * l.h / 2, codes.data(), h);
      c = codes.data();
    }
    const float s = static_cast<const float*>(scales.data)[r];
    for (size_t i = 0; i < h; ++i) v[i] = static_cast<float>(c[i]) * s;
    kernels::cpu::store_f32_as(
        v.data(), static_cast<uint8_t*>(output.data) + static_cast<size_t>(r) * h * oes,
        output.dtype, h);
  }
}

}  // namespace commfuse::ops
