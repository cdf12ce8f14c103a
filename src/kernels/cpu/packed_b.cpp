#include "kernels/cpu/packed_b.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/params.hpp"
#include "core/simd.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace commfuse::kernels::cpu {
namespace {

// Element offset of b(k, j) in the packed layout.
int64_t offset(const PackedLayout& l, int64_t k, int64_t j) {
  const int64_t kspan = l.k_block * l.pair;
  return k / kspan * l.k_stride + j / l.n_block * l.n_stride +
         (k % kspan) / l.pair * l.n_block * l.pair + j % l.n_block * l.pair + k % l.pair;
}

// Columns [j0, j0 + cols) of rows k and k + 1 (r1 null past the last row: zeros), one
// element at a time.
void pair_scalar(const PackedLayout& l, const uint16_t* r0, const uint16_t* r1, int64_t k,
                 int64_t j0, int64_t cols, uint16_t* dst) {
  for (int64_t j = j0; j < j0 + cols; ++j) {
    uint16_t* d = dst + offset(l, k, j);
    d[0] = r0[j];
    d[1] = r1 != nullptr ? r1[j] : uint16_t{0};
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// One full column block of rows k, k + 1: 32 columns per step, the two rows' words
// interleaved (unpack within 128-bit lanes, then the lanes put in order by a qword permute:
// vpermt2w, one instruction instead of three, is several uops on Intel and ran no faster).
__attribute__((target("avx512f,avx512bw"))) void pair_block_avx512(const uint16_t* r0,
                                                                   const uint16_t* r1, int64_t cols,
                                                                   uint16_t* d) {
  const __m512i lo = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i hi = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  for (int64_t j = 0; j < cols; j += 32) {
    const __m512i a = _mm512_loadu_si512(r0 + j), b = _mm512_loadu_si512(r1 + j);
    const __m512i l = _mm512_unpacklo_epi16(a, b), h = _mm512_unpackhi_epi16(a, b);
    _mm512_storeu_si512(d + 2 * j, _mm512_permutex2var_epi64(l, lo, h));
    _mm512_storeu_si512(d + 2 * j + 32, _mm512_permutex2var_epi64(l, hi, h));
  }
}
#endif

bool use_avx512bw() {
#if defined(__x86_64__) && defined(__GNUC__)
  const commfuse::cpu::Features& f = commfuse::cpu::features();
  return f.avx512f && f.avx512bw;
#else
  return false;
#endif
}

// Four rows' bytes of `cols` columns as one 32-bit word per column (row 0 in the low byte):
// a column's quad of k, as the int8 layouts store it. GCC vectorizes it per ISA.
CF_SIMD_KERNEL(void, quad_rows,
               (const uint8_t* r0, const uint8_t* r1, const uint8_t* r2, const uint8_t* r3,
                int64_t cols, uint32_t* d),
               (r0, r1, r2, r3, cols, d)) {
  for (int64_t j = 0; j < cols; ++j)
    d[j] = uint32_t{r0[j]} | uint32_t{r1[j]} << 8 | uint32_t{r2[j]} << 16 | uint32_t{r3[j]} << 24;
}

// sums[j] += row[j], int8 values modulo 2^32 (unsigned: a k past 2^24 wraps, defined).
// GCC vectorizes it per ISA.
CF_SIMD_KERNEL(void, add_row_s8, (const int8_t* row, int64_t cols, uint32_t* sums),
               (row, cols, sums)) {
  for (int64_t j = 0; j < cols; ++j) sums[j] += static_cast<uint32_t>(int32_t{row[j]});
}

// The s8 x s8 compensation of l (comp_offset): -128 * sum_k b(k, j) per column, 0 in the
// padding, as oneDNN's reorder writes it.
void write_compensation(const PackedLayout& l, const int8_t* b, int64_t k, int64_t n, int64_t ldb,
                        bool transposed, uint8_t* out) {
  std::vector<uint32_t> comp(static_cast<size_t>(l.padded_n), 0);
  if (transposed) {  // column j's k values are contiguous
    for (int64_t j = 0; j < n; ++j) {
      uint32_t sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<uint32_t>(int32_t{b[j * ldb + p]});
      comp[static_cast<size_t>(j)] = sum;
    }
  } else {
    for (int64_t p = 0; p < k; ++p) add_row_s8(b + p * ldb, n, comp.data());
  }
  // Modulo 2^32, as oneDNN's int32 arithmetic (then an int32 by C++20's conversion): only a
  // k past 2^17 leaves int32 here, where the GEMM's own sums (up to 127 * 128 * k) have too.
  for (uint32_t& c : comp) c *= static_cast<uint32_t>(-128);
  std::memcpy(out + l.comp_offset, comp.data(), comp.size() * sizeof(uint32_t));
}

}  // namespace

std::optional<PackedLayout> packed_layout(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.ndims != 2 || d.format_kind != dnnl_blocked || d.offset0 != 0) return std::nullopt;
  const bool s8 = d.data_type == dnnl_s8;
  if (d.data_type != dnnl_bf16 && d.data_type != dnnl_f16 && !s8) return std::nullopt;
  // int8 weights may carry the s8 x s8 compensation after the data (without AMX): written
  // here as oneDNN's reorder writes it, one int32 per column (mask 2: dimension n); not with
  // the scale_adjust flag (weights scaled, AVX-512 without VNNI) or any other.
  const bool comp = s8 && d.extra.flags == dnnl_memory_extra_flag_compensation_conv_s8s8 &&
                    d.extra.compensation_mask == 2;
  if (d.extra.flags != 0 && !comp) return std::nullopt;
  const int64_t pair = s8 ? 4 : 2, elem = s8 ? 1 : 2;
  const auto& b = d.format_desc.blocking;
  if (b.inner_nblks != 3 || b.inner_idxs[0] != 0 || b.inner_idxs[1] != 1 || b.inner_idxs[2] != 0 ||
      b.inner_blks[2] != pair)
    return std::nullopt;
  PackedLayout l;
  l.k_block = b.inner_blks[0];
  l.n_block = b.inner_blks[1];
  l.pair = pair;
  l.k_stride = b.strides[0];
  l.n_stride = b.strides[1];
  l.bytes = md.get_size();
  l.padded_k = d.padded_dims[0];
  l.padded_n = d.padded_dims[1];
  const int64_t inner = l.k_block * l.n_block * l.pair;
  const int64_t kspan = l.k_block * l.pair;
  if (l.padded_k % kspan != 0 || l.padded_n % l.n_block != 0 || l.padded_k < d.dims[0] ||
      l.padded_n < d.dims[1])
    return std::nullopt;
  // The blocks tile the buffer without overlap: one outer stride is a block, the other a
  // whole run of blocks along the first (both outer orders occur), and the last block ends
  // inside the buffer.
  const int64_t kblocks = l.padded_k / kspan, nblocks = l.padded_n / l.n_block;
  const bool n_outer = l.k_stride == inner && l.n_stride >= kblocks * inner;
  const bool k_outer = l.n_stride == inner && l.k_stride >= nblocks * inner;
  const int64_t last = (kblocks - 1) * l.k_stride + (nblocks - 1) * l.n_stride + inner;
  // The blocks' extent as oneDNN's size() takes it (the larger outer stride times its block
  // count; both layouts its matmul picks are dense: kblocks * nblocks * inner).
  const size_t data_bytes =
      static_cast<size_t>(std::max(kblocks * l.k_stride, nblocks * l.n_stride) * elem);
  // The compensation right after the blocks. oneDNN 2.6 sizes the buffer for more (3 int32
  // per column) and its reorder writes only these padded_n; the kernel reads no more.
  if (comp) {
    l.comp_offset = data_bytes;
    if (l.bytes < data_bytes + static_cast<size_t>(l.padded_n) * sizeof(int32_t))
      return std::nullopt;
  }
  const size_t data_end = comp ? data_bytes : l.bytes;
  const bool tiles = (n_outer || k_outer) && static_cast<size_t>(last * elem) <= data_end;
  if (!tiles) return std::nullopt;
  return l;
}

void pack_b(const PackedLayout& l, const void* b, int64_t k, int64_t n, int64_t ldb, void* dst) {
  const auto* src = static_cast<const uint16_t*>(b);
  auto* out = static_cast<uint16_t*>(dst);
  if (l.padded_k != k || l.padded_n != n) std::memset(dst, 0, l.bytes);
  const bool vector = use_avx512bw() && l.n_block % 32 == 0;
  const int64_t full_cols = vector ? n / l.n_block * l.n_block : 0;
  for (int64_t p = 0; p < k; p += 2) {
    const uint16_t* r0 = src + p * ldb;
    const uint16_t* r1 = p + 1 < k ? r0 + ldb : nullptr;
#if defined(__x86_64__) && defined(__GNUC__)
    if (r1 != nullptr)
      for (int64_t j = 0; j < full_cols; j += l.n_block)
        pair_block_avx512(r0 + j, r1 + j, l.n_block, out + offset(l, p, j));
    pair_scalar(l, r0, r1, p, r1 != nullptr ? full_cols : 0, r1 != nullptr ? n - full_cols : n,
                out);
#else
    pair_scalar(l, r0, r1, p, 0, n, out);
#endif
  }
}

bool packing_pays(int64_t max_rows) {
  const std::string pin = params::get_string("COMMFUSE_PACK_X2");
  if (pin == "never") return false;
  return pin == "always" || max_rows == 0 || max_rows >= 64;
}

void pack_b_transposed(const PackedLayout& l, const void* b, int64_t k, int64_t n, int64_t ldb,
                       void* dst) {
  const auto* src = static_cast<const uint16_t*>(b);
  auto* out = static_cast<uint16_t*>(dst);
  if (l.padded_k != k || l.padded_n != n) std::memset(dst, 0, l.bytes);
  for (int64_t j = 0; j < n; ++j) {
    const uint16_t* col = src + j * ldb;
    for (int64_t p = 0; p < k; p += 2) {
      uint16_t* d = out + offset(l, p, j);
      d[0] = col[p];
      d[1] = p + 1 < k ? col[p + 1] : uint16_t{0};
    }
  }
}

std::optional<PackedLayout> layout_for(MatmulDesc d) {
  d.b_packed = true;
  const PackedLayout* layout = packed_b_layout(*plan_matmul(d));
  if (layout == nullptr) return std::nullopt;
  return *layout;
}

void pack_b_s8(const PackedLayout& l, const int8_t* b, int64_t k, int64_t n, int64_t ldb,
               bool transposed, void* dst) {
  const auto* src = reinterpret_cast<const uint8_t*>(b);
  auto* out = static_cast<uint8_t*>(dst);
  if (l.padded_k != k || l.padded_n != n) std::memset(dst, 0, l.bytes);
  if (l.comp_offset != 0) write_compensation(l, b, k, n, ldb, transposed, out);
  // Offsets are multiples of 4 bytes; dst may be unaligned, so words go through memcpy.
  if (transposed) {  // column j's k values are contiguous: a quad is one 4-byte load
    // Per column block and quad of k, one offset() and then consecutive words (offset()
    // steps by `pair` along j inside a block).
    for (int64_t j0 = 0; j0 < n; j0 += l.n_block) {
      const int64_t cols = std::min(l.n_block, n - j0);
      for (int64_t p = 0; p < k; p += 4) {
        uint8_t* d = out + offset(l, p, j0);
        const int64_t take = std::min<int64_t>(4, k - p);
        for (int64_t jj = 0; jj < cols; ++jj) {
          uint8_t bytes[4] = {};
          std::memcpy(bytes, src + (j0 + jj) * ldb + p, static_cast<size_t>(take));
          std::memcpy(d + jj * 4, bytes, 4);
        }
      }
    }
    return;
  }
  std::vector<uint8_t> zeros(static_cast<size_t>(n), 0);
  std::vector<uint32_t> words(static_cast<size_t>(l.n_block));
  // Column groups of about 1 KiB per row, all k inside a group: the rows are read in runs
  // and each column block's output is written in order (one pass over all n per quad of
  // rows wrote 64 places 256 KiB apart at once: 4.5 ms for 4096x4096).
  const int64_t group = std::max<int64_t>(1, 1024 / l.n_block) * l.n_block;
  for (int64_t g = 0; g < n; g += group) {
    const int64_t g_end = std::min(n, g + group);
    for (int64_t p = 0; p < k; p += 4) {
      const uint8_t* r[4];
      for (int64_t i = 0; i < 4; ++i) r[i] = p + i < k ? src + (p + i) * ldb : zeros.data();
      for (int64_t j = g; j < g_end; j += l.n_block) {
        const int64_t cols = std::min(l.n_block, n - j);
        // A whole block's words are consecutive in dst (offset() steps by pair along j).
        quad_rows(r[0] + j, r[1] + j, r[2] + j, r[3] + j, cols, words.data());
        std::memcpy(out + offset(l, p, j), words.data(), static_cast<size_t>(cols) * 4);
      }
    }
  }
}

}  // namespace commfuse::kernels::cpu
