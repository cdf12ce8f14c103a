#include "ops/common/quant_row_gemm.hpp"

#include <algorithm>
#include <cstring>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"
#include "kernels/cpu/code_decode.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/dequant.hpp"
#include "kernels/cpu/int_matmul.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/small_m_int_gemm.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {
namespace {

namespace cpu = kernels::cpu;

// The int32/fp32 accumulator of one chunk: this many bytes (rows = this / (4 n), clamped,
// so past n = 65536, or 16384 for packed chunks of kMinPackedCallRows, it is larger).
constexpr int64_t kAccBytes = int64_t{16} << 20;
constexpr int64_t kMinChunkRows = 64;
constexpr int64_t kMaxChunkRows = 2048;
// A8W8 over packed x2: chunks whose int32 sums stay in cache for the dequantization, of at
// least kMinPackedCallRows rows (int_matmul.hpp: each call streams all of x2).
constexpr int64_t kPackedAccBytes = int64_t{1} << 20;

int64_t packed_chunk_rows(const QuantGemmShape& s) {
  const int64_t rows =
      std::clamp(kPackedAccBytes / (4 * s.n), cpu::kMinPackedCallRows, kMaxChunkRows);
  return std::max<int64_t>(1, std::min(rows, s.max_rows > 0 ? s.max_rows : kMaxChunkRows));
}

size_t align64(size_t v) {
  return (v + 63) / 64 * 64;
}

struct Layout {
  size_t b = 0, b_bytes = 0, packed = 0, b_scale = 0, bias = 0, acc = 0, a_dec = 0, y = 0,
         total = 0;
};

bool is_a8w8(const QuantGemmShape& s) {
  return s.q.mode == QuantMatmulMode::kA8W8;
}

cpu::IntMatmulDesc int_desc(const QuantGemmShape& s, int64_t rows) {
  cpu::IntMatmulDesc d;
  d.m = rows;
  d.k = s.k;
  d.n = s.n;
  d.lda = s.k;
  d.ldb = s.b.ld;
  d.ldc = s.n;
  d.b_transposed = s.b.transposed;
  d.a_max = 128;  // int8 codes: -128 is allowed
  d.b_max = 128;
  d.b_packed = s.int8_packed;
  return d;
}

// FP8/HiF8: a (rows x k decoded, dense) @ b (decoded, dense in b's orientation) -> fp32.
cpu::MatmulDesc float_desc(const QuantGemmShape& s, int64_t rows) {
  const DType t = s.decode_to_bf16 ? DType::kBFloat16 : DType::kFloat32;
  cpu::MatmulDesc d = cpu::dense_matmul_desc(rows, s.k, s.n, t, s.b.transposed);
  d.c_dtype = DType::kFloat32;
  return d;
}

Layout layout(const QuantGemmShape& s) {
  CF_ASSERT(s.chunk_rows > 0);
  Layout l;
  const auto kn = static_cast<size_t>(s.k * s.n);
  if (s.small_m)
    l.b_bytes = 0;  // read in place
  else if (is_a8w8(s))
    l.b_bytes = s.int8_b_bytes;
  else
    l.b_bytes = kn * (s.decode_to_bf16 ? 2 : 4);
  const auto n = static_cast<size_t>(s.n), chunk = static_cast<size_t>(s.chunk_rows);
  l.packed = align64(l.b + l.b_bytes);
  l.b_scale = align64(l.packed + (s.packed ? s.packed->bytes : 0));
  l.bias = align64(l.b_scale + n * 4);
  l.acc = align64(l.bias + n * 4);
  l.a_dec = align64(l.acc + chunk * n * 4);
  const size_t a_dec_bytes =
      is_a8w8(s) ? 0 : chunk * static_cast<size_t>(s.k) * (s.decode_to_bf16 ? 2 : 4);
  l.y = align64(l.a_dec + a_dec_bytes);
  l.total = l.y + n * 4;
  return l;
}

}  // namespace

void plan_quant_gemm(QuantGemmShape& s) {
  CF_ASSERT(s.q.quantized());
  int64_t chunk = std::clamp(kAccBytes / (4 * s.n), kMinChunkRows, kMaxChunkRows);
  if (s.max_rows > 0) chunk = std::min(chunk, s.max_rows);
  s.chunk_rows = std::max<int64_t>(1, chunk);
  s.small_m = is_a8w8(s) && cpu::direct_int8_kernel_pays(s.max_rows);  // (quant_row_gemm.hpp)
  s.int8_packed = false;
  if (is_a8w8(s) && !s.small_m) {
    // Chunks of packed_chunk_rows over x2 packed where packing pays, judged on whether the
    // unpacked chunks already make several calls over x2 (int_matmul.hpp:
    // int8_packing_pays).
    QuantGemmShape p = s;
    p.int8_packed = true;
    p.chunk_rows = packed_chunk_rows(s);
    const auto plan = cpu::plan_int_matmul(int_desc(p, p.chunk_rows));
    const bool several = s.max_rows == 0 || s.max_rows > s.chunk_rows;
    if (cpu::int8_packing_pays(*plan, several, std::max<int64_t>(1, s.max_rows))) {
      s.int8_packed = true;
      s.chunk_rows = p.chunk_rows;
    }
  }
  s.int8_prepacked = false;
  if (const PackedWeightImpl* pre = s.b.prepacked;
      is_a8w8(s) && !s.small_m && pre != nullptr && pre->int_plan) {
    // Prepared ahead: the packed chunking where the kernel reads packed b (preparing costs
    // nothing now), provided the chunks' plan reads the layout prepared.
    QuantGemmShape p = s;
    p.int8_packed = cpu::reads_packed_b(*pre->int_plan);
    if (p.int8_packed) p.chunk_rows = packed_chunk_rows(s);
    if (cpu::same_prepared_b(*cpu::plan_int_matmul(int_desc(p, p.chunk_rows)), *pre->int_plan)) {
      s.int8_packed = p.int8_packed;
      s.chunk_rows = p.chunk_rows;
      s.int8_prepacked = true;
    }
  }
  s.int8_b_bytes = is_a8w8(s) && !s.small_m && !s.int8_prepacked
                       ? cpu::prepared_b_bytes(*cpu::plan_int_matmul(int_desc(s, s.chunk_rows)))
                       : 0;
  if (!is_a8w8(s)) {
    // bf16 where oneDNN multiplies it natively (AVX512-BF16, AMX): half the bytes of fp32.
    cpu::MatmulDesc probe =
        cpu::dense_matmul_desc(s.chunk_rows, s.k, s.n, DType::kBFloat16, s.b.transposed);
    probe.c_dtype = DType::kFloat32;
    s.decode_to_bf16 = !cpu::widens_inputs(*cpu::plan_matmul(probe));
    // The decoded chunk is written, then read by the GEMM: within half of L2 it is read
    // from cache. Unless x2 is larger still: the GEMM rereads (and oneDNN repacks) it for
    // every chunk, so fewer, larger chunks cost less there.
    const int64_t es = s.decode_to_bf16 ? 2 : 4;
    const int64_t keep = std::max<int64_t>(
        static_cast<int64_t>(commfuse::cpu::l2_cache_bytes() / 2), s.k * s.n * es);
    s.chunk_rows = std::min(s.chunk_rows, std::max(kMinChunkRows, keep / (es * s.k)));
    s.packed.reset();
    if (s.decode_to_bf16 && !s.b.transposed && cpu::packing_pays(s.max_rows))
      s.packed = cpu::layout_for(float_desc(s, s.chunk_rows));
  }
}

size_t quant_gemm_workspace_bytes(const QuantGemmShape& s) {
  return layout(s).total;
}

std::string describe_quant_gemm(const QuantGemmShape& s) {
  std::string kernel;
  bool packed = false;
  if (s.small_m)
    kernel = cpu::small_m_int_gemm_description();
  else if (is_a8w8(s))
    kernel = cpu::describe(*cpu::plan_int_matmul(int_desc(s, s.chunk_rows))) +
             (s.int8_prepacked ? ", x2 prepacked (PackedWeight)" : "");
  else
    kernel =
        detail::cat(dtype_name(s.q.a_dtype), " x ", dtype_name(s.q.b_dtype), " decoded to ",
                    s.decode_to_bf16 ? "bfloat16" : "float32", ": ",
                    cpu::describe(*cpu::plan_matmul_over(
                        float_desc(s, s.chunk_rows), s.packed ? &*s.packed : nullptr, &packed)));
  return detail::cat(quant_matmul_mode_name(s.q.mode), " -> ", dtype_name(s.c_dtype),
                     ", chunks of ", s.chunk_rows, " rows, ", kernel);
}

QuantRowGemm::QuantRowGemm(const QuantGemmShape& s, void* workspace) : s_(s) {
  CF_ASSERT(s.chunk_rows > 0 && workspace != nullptr);
  const Layout l = layout(s);
  auto* ws = static_cast<uint8_t*>(workspace);
  trace::Span span("prepare x2", "quant_gemm", -1, static_cast<uint64_t>(s.k * s.n));
  const int64_t rows = s.b.transposed ? s.n : s.k;
  const int64_t cols = s.b.transposed ? s.k : s.n;
  const auto* src = static_cast<const uint8_t*>(s.b.data);
  if (s.small_m) {
    b_ = s.b.data;
  } else if (is_a8w8(s)) {
    const auto plan = cpu::plan_int_matmul(int_desc(s, s.chunk_rows));
    // The plan may differ from the planned one (the thread count changed since): its
    // prepared x2 must still fit the workspace, else x2 is read in place.
    if (s.int8_prepacked && cpu::same_prepared_b(*plan, *s.b.prepacked->int_plan)) {
      b_ = s.b.prepacked->data();  // PackedWeight: prepared ahead of the call
      if (s.int8_packed) packed_for_ = plan;
    } else if (l.b_bytes == 0 || cpu::prepared_b_bytes(*plan) != l.b_bytes) {
      b_ = s.b.data;  // read in place
    } else {
      cpu::prepare_b(*plan, static_cast<const int8_t*>(s.b.data), ws + l.b);
      b_ = ws + l.b;
      if (s.int8_packed) packed_for_ = plan;
    }
  } else {
    const size_t es = s.decode_to_bf16 ? 2 : 4;
    if (s.b.ld == cols)  // dense: one call, so the vector loop runs over all of it
      cpu::decode_codes(src, s.q.b_dtype, s.decode_to_bf16, ws + l.b,
                        static_cast<size_t>(rows * cols));
    else
      for (int64_t r = 0; r < rows; ++r)
        cpu::decode_codes(src + r * s.b.ld, s.q.b_dtype, s.decode_to_bf16,
                          ws + l.b + static_cast<size_t>(r * cols) * es, static_cast<size_t>(cols));
    b_ = ws + l.b;
    if (s.packed) {  // decoded dense (k x n, row-major: packed only then) -> the GEMM's layout
      cpu::pack_b(*s.packed, b_, s.k, s.n, s.n, ws + l.packed);
      packed_b_ = ws + l.packed;
    }
  }
  b_scale_ = reinterpret_cast<float*>(ws + l.b_scale);
  for (int64_t j = 0; j < s.n; ++j) b_scale_[j] = s.q.x2_scale[s.q.x2_per_channel ? j : 0];
  if (s.bias.data != nullptr) {
    bias32_ = reinterpret_cast<float*>(ws + l.bias);
    convert(s.bias.data, s.bias.dtype, bias32_, DType::kFloat32, static_cast<size_t>(s.n));
  }
  acc_ = ws + l.acc;
  a_dec_ = ws + l.a_dec;
  y_ = reinterpret_cast<float*>(ws + l.y);
}

void QuantRowGemm::run(const void* a, int64_t rows, RowScales a_scales, void* c,
                       void* a_copy) const {
  if (rows <= 0) return;
  const auto* a8 = static_cast<const uint8_t*>(a);
  auto* c8 = static_cast<uint8_t*>(c);
  auto* copy8 = static_cast<uint8_t*>(a_copy);
  // A8W8 reads the codes as they are: copied up front. FP8/HiF8 decode every chunk, which
  // copies it in the same pass.
  const bool decodes = !is_a8w8(s_);
  if (copy8 != nullptr && !decodes) cpu::copy(copy8, a8, static_cast<size_t>(rows * s_.k));
  const size_t c_row = dtype_storage_bytes(s_.c_dtype, static_cast<size_t>(s_.n));
  for (int64_t r0 = 0; r0 < rows; r0 += s_.chunk_rows) {
    const int64_t m = std::min(s_.chunk_rows, rows - r0);
    const size_t at = static_cast<size_t>(r0 * s_.k);
    chunk(a8 + at, m, a_scales.from(r0), c8 + static_cast<size_t>(r0) * c_row,
          copy8 != nullptr && decodes ? copy8 + at : nullptr);
  }
}

void QuantRowGemm::chunk(const uint8_t* a, int64_t rows, RowScales a_scales, uint8_t* c,
                         uint8_t* a_copy) const {
  const auto n = static_cast<size_t>(s_.n);
  const bool a8w8 = is_a8w8(s_);
  if (!a8w8) {
    trace::Span span("decode", "quant_gemm", -1, static_cast<uint64_t>(rows));
    cpu::decode_codes(a, s_.q.a_dtype, s_.decode_to_bf16, a_dec_, static_cast<size_t>(rows * s_.k),
                      a_copy);
  }
  {
    trace::Span span("gemm", "quant_gemm", -1, static_cast<uint64_t>(rows));
    if (s_.small_m) {
      cpu::small_m_int_gemm(reinterpret_cast<const int8_t*>(a), rows, s_.k,
                            static_cast<const int8_t*>(b_), s_.k, s_.n, s_.b.ld, s_.b.transposed,
                            static_cast<int32_t*>(acc_), s_.n);
    } else if (a8w8) {
      auto plan = cpu::plan_int_matmul(int_desc(s_, rows));
      const void* b = b_;
      if (s_.int8_packed && (!packed_for_ || !cpu::same_prepared_b(*plan, *packed_for_))) {
        cpu::IntMatmulDesc d = int_desc(s_, rows);  // another layout: the plain x2
        d.b_packed = false;
        plan = cpu::plan_int_matmul(d);
        b = s_.b.data;
      }
      cpu::int_matmul(*plan, reinterpret_cast<const int8_t*>(a), b, static_cast<int32_t*>(acc_));
    } else {
      bool packed = false;
      const auto plan =
          cpu::plan_matmul_over(float_desc(s_, rows), s_.packed ? &*s_.packed : nullptr, &packed);
      cpu::matmul(*plan, a_dec_, packed ? packed_b_ : b_, nullptr, acc_);
    }
  }
  trace::Span span("dequant", "quant_gemm", -1, static_cast<uint64_t>(rows));
  const size_t c_row = dtype_storage_bytes(s_.c_dtype, n);
  for (int64_t i = 0; i < rows; ++i) {
    const float sa = a_scales.at(i);
    float* y = s_.c_dtype == DType::kFloat32 ? reinterpret_cast<float*>(c + i * c_row) : y_;
    // SPEC §6: the scales' product first, in fp32; an int32 bias joins the exact sum (in
    // int64: no vector conversion of that on AVX2, and rare), a float bias the fp32 result.
    if (a8w8 && s_.q.bias_int != nullptr) {
      const int32_t* acc = static_cast<const int32_t*>(acc_) + static_cast<size_t>(i) * n;
      for (size_t j = 0; j < n; ++j)
        y[j] = static_cast<float>(int64_t{acc[j]} + s_.q.bias_int[j]) * (sa * b_scale_[j]);
      if (bias32_ != nullptr)
        for (size_t j = 0; j < n; ++j) y[j] += bias32_[j];
    } else if (a8w8) {
      cpu::scale_int_row(static_cast<const int32_t*>(acc_) + static_cast<size_t>(i) * n, sa,
                         b_scale_, bias32_, y, n);
    } else {
      cpu::scale_f32_row(static_cast<const float*>(acc_) + static_cast<size_t>(i) * n, sa, b_scale_,
                         bias32_, y, n);
    }
    if (s_.c_dtype != DType::kFloat32) cpu::store_f32_as(y, c + i * c_row, s_.c_dtype, n);
  }
}

}  // namespace commfuse::ops
