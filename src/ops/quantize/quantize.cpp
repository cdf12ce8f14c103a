// quantize / dequantize (SPEC §5): the helpers that produce exactly the (codes, scales)
// layouts quant_all_reduce and quant_reduce_scatter take, and the map those ops apply.
// Local (no communicator): errors name the function and the argument, not a rank.
//
// Rules SPEC §5 leaves open (docs/architecture.md "Quantize helpers"):
// - amax is taken over the group's finite values; ±inf then saturates to the format's
//   largest code and NaN stays NaN (int8: 0), like any saturating conversion.
// - per_token_group: a group whose amax / qmax is 0 (all zeros, or an amax so small that the
//   division underflows) gets scale 1.
#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/simd.hpp"
#include "kernels/cpu/dequant.hpp"
#include "ops/common/tensor_checks.hpp"
#include "ops/common/tensor_size.hpp"
#include "ops/quantize/per_token.hpp"

namespace commfuse {
namespace {

using kernels::cpu::ScaleKind;

enum class Mode { kPerTokenGroup, kMx, kPerToken };

std::string shape_of(const TensorView& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim; ++i) s += detail::cat(i ? ", " : "", t.shape[i]);
  return s + (t.ndim == 1 ? ",)" : ")");
}

Mode parse_mode(const char* fn, std::string_view mode, int64_t group_size) {
  CF_CHECK_NOTNULL(mode.data(), fn, ": mode is null");
  Mode m;
  if (mode == "per_token_group") {
    m = Mode::kPerTokenGroup;
  } else if (mode == "mx") {
    m = Mode::kMx;
  } else if (mode == "per_token") {
    CF_CHECK_ARG(group_size == 0, fn, ": group_size is ", group_size,
                 " but mode per_token has one scale per row (pass 0)");
    return Mode::kPerToken;
  } else {
    detail::throw_status(Status::kParamInvalid,
                         detail::cat(fn, ": mode is '", mode,
                                     "' but must be \"per_token_group\", \"mx\" or \"per_token\""));
  }
  const int64_t g = m == Mode::kMx ? kernels::cpu::kMxGroup : kernels::cpu::kKgGroup;
  CF_CHECK_ARG(group_size == 0 || group_size == g, fn, ": group_size is ", group_size, " but mode ",
               mode, " uses ", g, " (pass 0 or ", g, ")");
  return m;
}

// An output sharing bytes with an input (or with the other output) is PARAM_INVALID naming
// both: rows are converted one at a time, so a shared byte can be written before it is read
// (a dequantize output starting inside q gave wrong values, silently). After check_dense.
void check_apart(const char* fn, const char* out_name, const TensorView& out, const char* in_name,
                 const TensorView& in) {
  CF_CHECK_ARG(!ops::share_bytes(out, in), fn, ": ", out_name, " and ", in_name, " share memory (",
               out_name, " is written while ", in_name, " is read: pass separate buffers)");
}

void check_dense(const char* fn, const char* name, const TensorView& t) {
  CF_CHECK_NOTNULL(t.present() ? &t : nullptr, fn, ": ", name, " is null");
  CF_CHECK_ARG(t.ndim <= TensorView::kMaxDims, fn, ": ", name, " has ", t.ndim, " dims");
  for (int i = 0; i < t.ndim; ++i)
    CF_CHECK_ARG(t.shape[i] > 0, fn, ": ", name, " dim ", i, " is ", t.shape[i], " (shape ",
                 shape_of(t), "): empty tensors are not accepted");
  CF_CHECK_NOTNULL(t.data, fn, ": ", name, " data is null (shape ", shape_of(t), ")");
  CF_CHECK_ARG(ops::size_fits_int64(t), fn, ": ", name, " shape ", shape_of(t),
               " holds more than 2^63 - 1 bytes");
  CF_CHECK_ARG(t.device.type == DeviceType::kCpu && t.device.index == 0, fn, ": ", name, " is on ",
               device_name(t.device), ": not supported (", fn, " takes host tensors only)");
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    CF_CHECK_ARG(t.shape[i] == 1 || t.strides[i] == expect, fn, ": ", name,
                 " must be row-major contiguous (shape ", shape_of(t), ", dim ", i, " stride ",
                 t.strides[i], ", expected ", expect, ")");
    expect *= t.shape[i];
  }
}

// quantize's outputs apart from x and from each other (after check_dense or check_layout).
void check_outputs_apart(const char* fn, const TensorView& x, const TensorView& q,
                         const TensorView& scales) {
  check_apart(fn, "q", q, "x", x);
  check_apart(fn, "scales", scales, "x", x);
  check_apart(fn, "scales", scales, "q", q);
}

struct Layout {
  Mode mode;
  DType code_dtype;
  int64_t rows = 0, h = 0;
  ScaleKind kind() const { return mode == Mode::kMx ? ScaleKind::kMx32 : ScaleKind::kGroup128; }
};

// The float tensor (x or output), the codes (q) and the scales, as the ops take them.
Layout check_layout(const char* fn, Mode mode, const char* fname, const TensorView& f,
                    const TensorView& q, const TensorView& scales) {
  check_dense(fn, fname, f);
  check_dense(fn, "q", q);
  check_dense(fn, "scales", scales);
  CF_CHECK_ARG(
      f.dtype == DType::kFloat32 || f.dtype == DType::kFloat16 || f.dtype == DType::kBFloat16, fn,
      ": ", fname, " dtype is ", dtype_name(f.dtype), " but must be float32, float16 or bfloat16");
  Layout l{mode, q.dtype};
  if (mode == Mode::kMx)
    CF_CHECK_ARG(q.dtype == DType::kFloat8E4M3FN || q.dtype == DType::kFloat8E5M2, fn,
                 ": q dtype is ", dtype_name(q.dtype),
                 " but mode mx takes float8_e4m3fn or float8_e5m2");
  else
    CF_CHECK_ARG(q.dtype == DType::kInt8 || q.dtype == DType::kHiFloat8 ||
                     q.dtype == DType::kFloat8E4M3FN || q.dtype == DType::kFloat8E5M2,
                 fn, ": q dtype is ", dtype_name(q.dtype),
                 " but mode per_token_group takes int8, hifloat8, float8_e4m3fn or float8_e5m2");
  bool same = q.ndim == f.ndim;
  for (int i = 0; same && i < f.ndim; ++i) same = q.shape[i] == f.shape[i];
  CF_CHECK_ARG(same, fn, ": q shape is ", shape_of(q), " but ", fname, " shape is ", shape_of(f),
               " (must match)");
  l.h = f.shape[f.ndim - 1];
  l.rows = f.numel() / l.h;
  const bool mx = mode == Mode::kMx;
  const int64_t div = mx ? 64 : 128;
  CF_CHECK_ARG(l.h % div == 0, fn, ": ", fname, " dim ", f.ndim - 1, " (H) is ", l.h,
               " but must be a multiple of ", div, mx ? " (mode mx)" : " (mode per_token_group)");
  const DType sd = mx ? DType::kFloat8E8M0 : DType::kFloat32;
  CF_CHECK_ARG(scales.dtype == sd, fn, ": scales dtype is ", dtype_name(scales.dtype), " but mode ",
               mx ? "mx" : "per_token_group", " uses ", dtype_name(sd));
  const int want = f.ndim - 1 + (mx ? 2 : 1);
  bool ok = scales.ndim == want;
  for (int i = 0; ok && i < f.ndim - 1; ++i) ok = scales.shape[i] == f.shape[i];
  ok = ok && scales.shape[f.ndim - 1] == l.h / div && (!mx || scales.shape[f.ndim] == 2);
  CF_CHECK_ARG(ok, fn, ": scales shape is ", shape_of(scales), " but must be ", fname,
               "'s leading dims + ", mx ? "(H/64, 2)" : "(H/128,)", " with H/", div, " = ",
               l.h / div);
  return l;
}

float qmax_of(DType t) {
  switch (t) {
    case DType::kInt8:
      return 127.0f;
    case DType::kFloat8E4M3FN:
      return 448.0f;
    case DType::kFloat8E5M2:
      return 57344.0f;
    default:
      return 15.0f;  // hifloat8: the group's largest value stays in the 3-mantissa-bit band
  }
}

// The array loops below vectorize (core/simd.hpp): 16 Mi fp32 values took 55 ms per_token_group
// int8 and 118 ms mx e4m3 on the AMX Xeon when each group of 128 / 32 went through its own
// conversions, a scalar amax and a libm ldexp per value. Each computes what the scalar form
// did, value by value, so the codes and scales keep their bits.

// The largest |v| over the finite values (0 if none; simd::lane_max); a value is finite when
// its exponent bits are not all ones.
CF_SIMD_KERNEL(float, finite_amax, (const float* v, int64_t n), (v, n)) {
  return simd::lane_max(static_cast<size_t>(n), [v](size_t i) {
    const uint32_t bits = std::bit_cast<uint32_t>(v[i]) & 0x7FFFFFFFu;
    return bits < 0x7F800000u ? std::bit_cast<float>(bits) : 0.0f;
  });
}

// per_token_group: v / scale, then for int8 clamped to [-127, 127] (NaN passes: no compare
// holds).
CF_SIMD_KERNEL_AVX512(void, divide_clamp, (float* v, int64_t n, float scale, bool clamp127),
                      (v, n, scale, clamp127)) {
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] / scale;
  if (clamp127)
    for (int64_t i = 0; i < n; ++i)
      v[i] = v[i] < -127.0f ? -127.0f : (127.0f < v[i] ? 127.0f : v[i]);
}

// mx: v * 2^k as ldexp gives it: p is 2^k exactly (k = -e in [-119, 127] for a finite amax:
// a normal float), and one IEEE multiply rounds x * p once, as ldexp does.
CF_SIMD_KERNEL_AVX512(void, scale_by, (float* v, int64_t n, float p), (v, n, p)) {
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] * p;
}

}  // namespace

void quantize(const TensorView& x, std::string_view mode, const TensorView& q,
              const TensorView& scales, int64_t group_size) {
  constexpr const char* fn = "quantize";
  const simd::StandardFloatMode fp_mode;  // SPEC §5's fp32 arithmetic, whatever the caller's mode
  if (parse_mode(fn, mode, group_size) == Mode::kPerToken) {
    check_dense(fn, "x", x);
    check_dense(fn, "q", q);
    check_dense(fn, "scales", scales);
    check_outputs_apart(fn, x, q, scales);
    ops::quantize_per_token(fn, x, q, scales);
    return;
  }
  const Layout l = check_layout(fn, parse_mode(fn, mode, group_size), "x", x, q, scales);
  check_outputs_apart(fn, x, q, scales);
  const int64_t g = kernels::cpu::scale_group(l.kind());
  const size_t xes = static_cast<size_t>(dtype_bits(x.dtype) / 8);
  const auto* xs = static_cast<const uint8_t*>(x.data);
  auto* qs = static_cast<uint8_t*>(q.data);
  const int64_t groups = l.h / g;
  // A row at a time: one conversion in and one out per row, the groups scaled in place.
  std::vector<float> row(static_cast<size_t>(l.h));
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t at = r * l.h;
    commfuse::convert(xs + static_cast<size_t>(at) * xes, x.dtype, row.data(), DType::kFloat32,
                      static_cast<size_t>(l.h));
    for (int64_t j = 0; j < groups; ++j) {
      float* v = row.data() + j * g;
      const int64_t grp = r * groups + j;
      const float amax = finite_amax(v, g);
      if (l.mode == Mode::kPerTokenGroup) {
        float scale = amax / qmax_of(l.code_dtype);
        if (scale == 0.0f) scale = 1.0f;
        // int8 symmetric [-127, 127]: -inf gives -127, not -128; NaN passes (→ 0).
        divide_clamp(v, g, scale, l.code_dtype == DType::kInt8);
        static_cast<float*>(scales.data)[grp] = scale;
      } else {
        const int emax = l.code_dtype == DType::kFloat8E4M3FN ? 8 : 15;
        int e = -127;  // all-zero group: scale byte 0x00
        if (amax > 0.0f) {
          int exp2 = 0;
          std::frexp(amax, &exp2);  // amax = m · 2^exp2, m in [0.5, 1): floor(log2) = exp2 - 1
          e = std::clamp(exp2 - 1 - emax, -127, 127);
        }
        scale_by(v, g, std::ldexp(1.0f, -e));
        static_cast<uint8_t*>(scales.data)[grp] = static_cast<uint8_t>(e + 127);
      }
    }
    commfuse::convert(row.data(), DType::kFloat32, qs + at, l.code_dtype, static_cast<size_t>(l.h),
                      /*saturate=*/true);
  }
}

void dequantize(const TensorView& q, const TensorView& scales, std::string_view mode,
                const TensorView& output, int64_t group_size) {
  constexpr const char* fn = "dequantize";
  const simd::StandardFloatMode fp_mode;  // SPEC §5's fp32 arithmetic, whatever the caller's mode
  if (parse_mode(fn, mode, group_size) == Mode::kPerToken) {
    check_dense(fn, "q", q);
    check_dense(fn, "scales", scales);
    check_dense(fn, "output", output);
    check_apart(fn, "output", output, "q", q);
    check_apart(fn, "output", output, "scales", scales);
    ops::dequantize_per_token(fn, q, scales, output);
    return;
  }
  const Layout l = check_layout(fn, parse_mode(fn, mode, group_size), "output", output, q, scales);
  check_apart(fn, "output", output, "q", q);
  check_apart(fn, "output", output, "scales", scales);
  const int64_t sb = kernels::cpu::scale_row_bytes(l.kind(), l.h);
  const size_t oes = static_cast<size_t>(dtype_bits(output.dtype) / 8);
  std::vector<float> acc(static_cast<size_t>(l.h));
  for (int64_t r = 0; r < l.rows; ++r) {
    kernels::cpu::dequant_accumulate_row(
        l.code_dtype, l.kind(), static_cast<const uint8_t*>(q.data) + r * l.h,
        static_cast<const uint8_t*>(scales.data) + r * sb, l.h, acc.data(), true);
    kernels::cpu::store_f32_as(
        acc.data(), static_cast<uint8_t*>(output.data) + static_cast<size_t>(r * l.h) * oes,
        output.dtype, static_cast<size_t>(l.h));
  }
}

}  // namespace commfuse
