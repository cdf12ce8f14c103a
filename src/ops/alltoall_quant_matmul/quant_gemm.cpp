// alltoall_quant_matmul's int GEMM and epilogue (quant_gemm.hpp).
#include "ops/alltoall_quant_matmul/quant_gemm.hpp"

#include <algorithm>

#include "core/trace.hpp"
#include "kernels/cpu/small_m_int_gemm.hpp"
#include "ops/alltoall_quant_matmul/row_kernels.hpp"
#include "ops/common/packed_weight.hpp"

namespace commfuse::ops {

namespace cpu = kernels::cpu;
using namespace a2aq;

QuantGemm::QuantGemm(const AlltoAllQuantMatmulPlanData& plan, uint8_t* ws)
    : plan_(plan), p_(plan.problem) {
  k_ = p_.k();
  n_ = static_cast<size_t>(p_.n);
  segments_ = p_.combo == QuantCombo::kA4W4 ? p_.world_size : 1;
  seg_k_ = p_.combo == QuantCombo::kA4W4 ? p_.h : k_;
  q_ = reinterpret_cast<int8_t*>(ws + plan.ws.q);
  scales_ = reinterpret_cast<float*>(ws + plan.ws.scales);
  acc_ = reinterpret_cast<int32_t*>(ws + plan.ws.acc);
  yacc_ = reinterpret_cast<float*>(ws + plan.ws.yacc);
  row_ = reinterpret_cast<float*>(ws + plan.ws.row);
  out_row_ = reinterpret_cast<float*>(ws + plan.ws.out_row);
  const size_t kn = static_cast<size_t>(k_) * n_;
  // x2 as int8 in its own layout (plain_b_: what a block whose plan reads plain b uses),
  // then, where the plan says, widened or packed once for every GEMM of this execute.
  const bool prepared = cpu::always_prepares_b(plan.path) || plan.b_packed;
  plain_b_ = p_.x2;
  if (p_.combo != QuantCombo::kA16W8) {
    // int4 x2 unpacked to int8; with x2 prepared ahead (PackedWeight) only if a block's plan
    // reads it plain after all (plain_segment): 16 Mi values took ~2 ms of a 51 ms call.
    unpacked_ = reinterpret_cast<int8_t*>(ws + (prepared ? plan.ws.b_unpacked : plan.ws.b));
    if (!plan.b_prepacked) unpack_x2();
  }
  b_ = plain_b_;
  if (plan.b_prepacked) {
    b_ = p_.packed_x2->data();  // PackedWeight: prepared ahead of the call
  } else if (prepared) {
    trace::Span span("prepare x2", "quant_gemm", -1, kn);
    for (int s = 0; s < segments_; ++s)
      cpu::prepare_b(*plan.full_gemm, plain_segment(s),
                     ws + plan.ws.b + static_cast<size_t>(s) * plan.b_segment_bytes);
    b_ = ws + plan.ws.b;
  }
  if (p_.smooth) {
    smooth_ = reinterpret_cast<float*>(ws + plan.ws.smooth);
    widen_half(p_.smooth, p_.x1_dtype, smooth_, static_cast<size_t>(k_));
  }
  if (p_.bias.data) {
    bias32_ = reinterpret_cast<float*>(ws + plan.ws.bias);
    convert(p_.bias.data, p_.bias.dtype, bias32_, DType::kFloat32, n_);
  }
}

cpu::IntMatmulDesc QuantGemm::desc(int64_t m, int64_t kk) const {
  return int_gemm_desc(plan_, m, kk);
}

void QuantGemm::run(int64_t r0, int64_t r1) {
  const int64_t m = r1 - r0;
  // Blocks of epilogue_rows (plan.hpp): each block's epilogue reads its sums from cache.
  const int64_t block = plan_.epilogue_rows > 0 ? plan_.epilogue_rows : m;
  for (int64_t b0 = r0; b0 < r1; b0 += block) {
    const int64_t b1 = std::min(r1, b0 + block), mb = b1 - b0;
    if (plan_.small_m) {  // A16W8, few rows, no VNNI (plan.hpp): x2 in place
      {
        trace::Span span("gemm", "quant_gemm", -1, static_cast<uint64_t>(mb));
        cpu::small_m_int_gemm(q_segment(0) + static_cast<size_t>(b0 * k_), mb, k_,
                              static_cast<const int8_t*>(plain_b_), k_, p_.n,
                              p_.x2_transposed ? k_ : p_.n, p_.x2_transposed, acc_, p_.n);
      }
      dequant_block(b0, mb, 0);
      continue;
    }
    auto g = cpu::plan_int_matmul(desc(mb, seg_k_));
    // x2 as prepared (packed, widened or int16 pairs: desc forces that path on every block), unless
    // this block's plan wants another layout than the one packed: then plain x2.
    bool prepared = plan_.b_packed || cpu::always_prepares_b(plan_.path);
    if (plan_.b_packed && !cpu::same_prepared_b(*g, *plan_.full_gemm)) {
      cpu::IntMatmulDesc d = desc(mb, seg_k_);
      d.b_packed = false;
      g = cpu::plan_int_matmul(d);
      prepared = false;
    }
    // A16: one segment, all of K; A4W4: one GEMM per source segment (each has its own
    // token scale), their dequantized products summed in rank order, then the bias.
    for (int s = 0; s < segments_; ++s) {
      const void* bs = prepared ? static_cast<const uint8_t*>(b_) +
                                      static_cast<size_t>(s) * plan_.b_segment_bytes
                                : static_cast<const void*>(plain_segment(s));
      {
        trace::Span span("gemm", "quant_gemm", -1, static_cast<uint64_t>(mb));
        cpu::int_matmul(*g, q_segment(s) + static_cast<size_t>(b0 * seg_k_), bs, acc_);
      }
      dequant_block(b0, mb, s);
    }
  }
}

void QuantGemm::dequant_block(int64_t b0, int64_t mb, int s) {
  const size_t out_es = dtype_storage_bytes(p_.out_dtype, 1);
  auto* out = static_cast<uint8_t*>(p_.output);
  const bool a4w4 = p_.combo == QuantCombo::kA4W4;
  trace::Span span("dequant", "quant_gemm", -1, static_cast<uint64_t>(mb));
  for (int64_t i = 0; i < mb; ++i) {
    const int32_t* acc = acc_ + static_cast<size_t>(i) * n_;
    uint8_t* dst = out + static_cast<size_t>(b0 + i) * n_ * out_es;
    if (!a4w4) {
      dequant_row(acc, p_.x2_scale, scales_[b0 + i], bias32_, out_row_, n_);
      store_row(out_row_, p_.out_dtype, dst, n_);
      continue;
    }
    float* y = yacc_ + static_cast<size_t>(i) * n_;
    dequant_segment(acc, p_.x2_scale, scales_[static_cast<size_t>(b0 + i) * segments_ + s], y, n_,
                    s == 0);
    if (s + 1 < segments_) continue;
    if (bias32_) add_bias(y, bias32_, n_);
    store_row(y, p_.out_dtype, dst, n_);
  }
}

void QuantGemm::unpack_x2() {
  unpack_int4(static_cast<const uint8_t*>(p_.x2), unpacked_,
              static_cast<size_t>(k_) * static_cast<size_t>(n_));
  plain_b_ = unpacked_;
  unpacked_ = nullptr;
}

const int8_t* QuantGemm::plain_segment(int s) {
  if (unpacked_ != nullptr) unpack_x2();
  const size_t at = static_cast<size_t>(s) * static_cast<size_t>(seg_k_);
  return static_cast<const int8_t*>(plain_b_) + (p_.x2_transposed ? at : at * n_);
}

}  // namespace commfuse::ops
