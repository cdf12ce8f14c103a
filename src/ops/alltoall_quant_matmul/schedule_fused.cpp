// alltoall_quant_matmul, fused: one all_to_all_stream whose unit is one token row.
//
//   pack      copies this rank's rows for a destination into the transport (on shm straight
//             into this rank's shared slot; A4W4 appends each row's fp32 token scale).
//   on_all    sees, for a piece of rows, the segments from all R source ranks in rank order,
//             in place (on shm: in the peers' slots). Each permuted row is assembled,
//             quantized and stored in one pass: the segments are widened (times the smooth
//             scale) into a K-float row buffer that stays in L1/L2 while amax is taken over
//             it, then quantized from there. Quantizing in on_all rather than per segment in
//             on_piece is what keeps it one pass over the peers' data: the row's scale needs
//             the amax of all R segments before any value can be rounded, and on_all is the
//             first point where they are all readable.
//   GEMM      once gemm_rows rows are assembled the int GEMM runs on them and the epilogue
//             writes their output rows; the last chunk runs after the stream. On shm the
//             default is one chunk (plan.hpp, gemm_chunk_rows says why).
#include <algorithm>
#include <cstring>

#include "core/convert_fast.hpp"
#include "core/simd.hpp"
#include "kernels/cpu/quant_per_token.hpp"
#include "ops/alltoall_quant_matmul/plan.hpp"

namespace commfuse::ops {
namespace {

namespace cpu = kernels::cpu;

CF_SIMD_KERNEL(float, mul_abs_max, (float* v, const float* smooth, size_t n), (v, smooth, n)) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    v[i] *= smooth[i];
    const float a = v[i] < 0 ? -v[i] : v[i];
    m = a > m ? a : m;
  }
  return m;
}

// y = f32(acc) * x2_scale[j] * s + bias[j] for one output row (bias32 null: no bias).
CF_SIMD_KERNEL(void, dequant_row,
               (const int32_t* acc, const float* x2_scale, float s, const float* bias32, float* y,
                size_t n),
               (acc, x2_scale, s, bias32, y, n)) {
  if (bias32 != nullptr)
    for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(acc[j]) * x2_scale[j] * s + bias32[j];
  else
    for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(acc[j]) * x2_scale[j] * s;
}

// A4W4: y (+)= f32(acc) * s * x2_scale[j], one source segment's partial product.
CF_SIMD_KERNEL(void, dequant_segment,
               (const int32_t* acc, const float* x2_scale, float s, float* y, size_t n, bool first),
               (acc, x2_scale, s, y, n, first)) {
  if (first)
    for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(acc[j]) * s * x2_scale[j];
  else
    for (size_t j = 0; j < n; ++j) y[j] += static_cast<float>(acc[j]) * s * x2_scale[j];
}

CF_SIMD_KERNEL(void, add_bias, (float* y, const float* bias32, size_t n), (y, bias32, n)) {
  for (size_t j = 0; j < n; ++j) y[j] += bias32[j];
}

// count (even) int4 values, two per byte, element 2j in the low nibble -> int8.
CF_SIMD_KERNEL(void, unpack_int4_s8, (const uint8_t* src, int8_t* dst, size_t count),
               (src, dst, count)) {
  for (size_t j = 0; j < count / 2; ++j) {
    const uint8_t b = src[j];
    dst[2 * j] = static_cast<int8_t>(static_cast<int8_t>(b << 4) >> 4);
    dst[2 * j + 1] = static_cast<int8_t>(static_cast<int8_t>(b) >> 4);
  }
}

void store_row(const float* y, DType t, void* dst, size_t n) {
  if (t == DType::kFloat16)
    fast::f32_to_f16(y, static_cast<uint16_t*>(dst), n);
  else if (t == DType::kBFloat16)
    fast::f32_to_bf16(y, static_cast<uint16_t*>(dst), n);
  else
    std::memcpy(dst, y, n * sizeof(float));
}

void widen_half(const void* src, DType t, float* dst, size_t n) {
  if (t == DType::kFloat16)
    fast::f16_to_f32(static_cast<const uint16_t*>(src), dst, n);
  else
    fast::bf16_to_f32(static_cast<const uint16_t*>(src), dst, n);
}

class FusedRun {
 public:
  FusedRun(const AlltoAllQuantMatmulPlanData& plan, uint8_t* ws)
      : plan_(plan), p_(plan.problem), ws_(ws) {
    rows_ = p_.rows();
    k_ = p_.k();
    n_ = static_cast<size_t>(p_.n);
    R_ = p_.world_size;
    a4w4_ = p_.combo == QuantCombo::kA4W4;
    es_ = a4w4_ ? 0 : dtype_storage_bytes(p_.x1_dtype, 1);
    seg_bytes_ = a4w4_ ? static_cast<size_t>(p_.h / 2) : static_cast<size_t>(p_.h) * es_;
    unit_ = seg_bytes_ + (a4w4_ ? sizeof(float) : 0);
    q_ = reinterpret_cast<int8_t*>(ws_ + plan.ws.q);
    scales_ = reinterpret_cast<float*>(ws_ + plan.ws.scales);
    acc_ = reinterpret_cast<int32_t*>(ws_ + plan.ws.acc);
    yacc_ = reinterpret_cast<float*>(ws_ + plan.ws.yacc);
    row_ = reinterpret_cast<float*>(ws_ + plan.ws.row);
    out_row_ = reinterpret_cast<float*>(ws_ + plan.ws.out_row);
    prepare_operands();
  }

  void run(comm::Transport& t) {
    comm::AllToAllStream st;
    st.bytes = static_cast<uint64_t>(rows_) * unit_;
    st.unit = unit_;
    st.max_piece = static_cast<uint64_t>(kPieceRows) * unit_;
    st.pack = [&](int to, uint8_t* dst, uint64_t off, uint64_t n) { pack(to, dst, off, n); };
    st.on_all = [&](const uint8_t* const* parts, uint64_t off, uint64_t n) {
      assemble(parts, off, n);
    };
    t.all_to_all_stream(st);
    if (done_ < rows_) gemm(done_, rows_);  // the last chunk, after the stream
  }

 private:
  void prepare_operands() {
    const size_t kn = static_cast<size_t>(k_) * n_;
    if (plan_.path == cpu::IntMatmulPath::kF32Blocked) {
      b_ = ws_ + plan_.ws.b;
      cpu::prepare_b(*plan_.full_gemm, static_cast<const int8_t*>(p_.x2), ws_ + plan_.ws.b);
    } else if (p_.combo != QuantCombo::kA16W8) {
      unpack_int4_s8(static_cast<const uint8_t*>(p_.x2),
                     reinterpret_cast<int8_t*>(ws_ + plan_.ws.b), kn);
      b_ = ws_ + plan_.ws.b;
    } else {
      b_ = p_.x2;
    }
    if (p_.smooth) {
      smooth_ = reinterpret_cast<float*>(ws_ + plan_.ws.smooth);
      widen_half(p_.smooth, p_.x1_dtype, smooth_, static_cast<size_t>(k_));
    }
    if (p_.bias.data) {
      bias32_ = reinterpret_cast<float*>(ws_ + plan_.ws.bias);
      convert(p_.bias.data, p_.bias.dtype, bias32_, DType::kFloat32, n_);
    }
  }

  // Rows [off/unit, (off+n)/unit) of this rank's block for destination `to`.
  void pack(int to, uint8_t* dst, uint64_t off, uint64_t n) {
    const int64_t first = to * rows_ + static_cast<int64_t>(off / unit_);
    const auto* x1 = static_cast<const uint8_t*>(p_.x1);
    if (!a4w4_) {
      std::memcpy(dst, x1 + static_cast<size_t>(first) * unit_, n);
      return;
    }
    for (uint64_t j = 0; j < n / unit_; ++j) {
      const int64_t r = first + static_cast<int64_t>(j);
      std::memcpy(dst + j * unit_, x1 + static_cast<size_t>(r) * seg_bytes_, seg_bytes_);
      std::memcpy(dst + j * unit_ + seg_bytes_, p_.token_scale + r, sizeof(float));
    }
  }

  void assemble(const uint8_t* const* parts, uint64_t off, uint64_t n) {
    const int64_t r0 = static_cast<int64_t>(off / unit_);
    const int64_t nr = static_cast<int64_t>(n / unit_);
    const size_t h = static_cast<size_t>(p_.h), k = static_cast<size_t>(k_);
    auto* a2a = static_cast<uint8_t*>(p_.all_to_all_out);
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t i = r0 + j;
      int8_t* q = q_ + static_cast<size_t>(i) * k;
      if (a4w4_) {
        for (int s = 0; s < R_; ++s) {
          const uint8_t* seg = parts[s] + static_cast<size_t>(j) * unit_;
          unpack_int4_s8(seg, q + static_cast<size_t>(s) * h, h);
          std::memcpy(&scales_[static_cast<size_t>(i) * R_ + s], seg + seg_bytes_, sizeof(float));
          if (a2a)
            std::memcpy(a2a + (static_cast<size_t>(i) * R_ + s) * seg_bytes_, seg, seg_bytes_);
        }
        continue;
      }
      float amax = 0.0f;
      for (int s = 0; s < R_; ++s) {
        const uint8_t* seg = parts[s] + static_cast<size_t>(j) * unit_;
        float* v = row_ + static_cast<size_t>(s) * h;
        widen_half(seg, p_.x1_dtype, v, h);
        const float m =
            smooth_ ? mul_abs_max(v, smooth_ + static_cast<size_t>(s) * h, h) : cpu::abs_max(v, h);
        amax = std::max(amax, m);
        if (a2a) std::memcpy(a2a + (static_cast<size_t>(i) * R_ + s) * seg_bytes_, seg, seg_bytes_);
      }
      scales_[i] = cpu::quantize_row_with_amax(row_, k, amax, plan_.qmax, q);
    }
    const int64_t assembled = r0 + nr;
    if (assembled - done_ >= plan_.gemm_rows && assembled < rows_) {
      gemm(done_, assembled);
      done_ = assembled;
    }
  }

  cpu::IntMatmulDesc desc(int64_t m, int64_t kk) const {
    cpu::IntMatmulDesc d;
    d.m = m;
    d.k = kk;
    d.n = p_.n;
    d.lda = k_;
    d.ldb = p_.x2_transposed ? k_ : p_.n;
    d.ldc = p_.n;
    d.b_transposed = p_.x2_transposed;
    d.a_max = plan_.a_max;
    d.b_max = plan_.b_max;
    return d;
  }

  // Rows [r0, r1): int GEMM, then the epilogue (SPEC §3) row by row.
  void gemm(int64_t r0, int64_t r1) {
    const int64_t m = r1 - r0;
    const size_t k = static_cast<size_t>(k_);
    const size_t out_es = dtype_storage_bytes(p_.out_dtype, 1);
    auto* out = static_cast<uint8_t*>(p_.output);
    if (!a4w4_) {
      const auto g = cpu::plan_int_matmul(desc(m, k_));
      cpu::int_matmul(*g, q_ + static_cast<size_t>(r0) * k, b_, acc_);
      for (int64_t i = 0; i < m; ++i) {
        dequant_row(acc_ + static_cast<size_t>(i) * n_, p_.x2_scale, scales_[r0 + i], bias32_,
                    out_row_, n_);
        store_row(out_row_, p_.out_dtype, out + static_cast<size_t>(r0 + i) * n_ * out_es, n_);
      }
      return;
    }
    // A4W4: one GEMM per source segment (each has its own token scale), summed in fp32 in
    // rank order.
    const auto g = cpu::plan_int_matmul(desc(m, p_.h));
    const size_t h = static_cast<size_t>(p_.h);
    const auto* b = static_cast<const int8_t*>(b_);
    for (int s = 0; s < R_; ++s) {
      const int8_t* bs = p_.x2_transposed ? b + s * h : b + s * h * n_;
      cpu::int_matmul(*g, q_ + static_cast<size_t>(r0) * k + s * h, bs, acc_);
      for (int64_t i = 0; i < m; ++i)
        dequant_segment(acc_ + static_cast<size_t>(i) * n_, p_.x2_scale,
                        scales_[static_cast<size_t>(r0 + i) * R_ + s],
                        yacc_ + static_cast<size_t>(i) * n_, n_, s == 0);
    }
    for (int64_t i = 0; i < m; ++i) {
      float* y = yacc_ + static_cast<size_t>(i) * n_;
      if (bias32_) add_bias(y, bias32_, n_);
      store_row(y, p_.out_dtype, out + static_cast<size_t>(r0 + i) * n_ * out_es, n_);
    }
  }

  const AlltoAllQuantMatmulPlanData& plan_;
  const AlltoAllQuantMatmulProblem& p_;
  uint8_t* ws_;
  int64_t rows_ = 0, k_ = 0, done_ = 0;
  size_t n_ = 0, es_ = 0, seg_bytes_ = 0, unit_ = 0;
  int R_ = 1;
  bool a4w4_ = false;
  int8_t* q_ = nullptr;
  float *scales_ = nullptr, *yacc_ = nullptr, *row_ = nullptr, *out_row_ = nullptr;
  int32_t* acc_ = nullptr;
  const void* b_ = nullptr;
  float* smooth_ = nullptr;
  float* bias32_ = nullptr;
};

}  // namespace

void run_alltoall_quant_matmul_fused(const AlltoAllQuantMatmulPlanData& plan, comm::CommImpl& comm,
                                     void* workspace) {
  FusedRun run(plan, static_cast<uint8_t*>(workspace));
  run.run(comm.transport());
}

}  // namespace commfuse::ops
