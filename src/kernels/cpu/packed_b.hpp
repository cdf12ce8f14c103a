// b packed into the blocked layout a native oneDNN matmul reads directly.
//
// Given b in plain row-major form, oneDNN 2.6's brgemm matmul (AVX512-BF16, AMX) copies b
// into its own blocked layout on every call before multiplying. When one execute runs
// several GEMMs over the same b (blocks arriving from peers, the chunks of a decoded FP8
// product, the row blocks of matmul_reduce_scatter), that copy is repeated per call. Packing
// b once per execute into the layout the primitive asks for (`format_tag::any`) and handing
// the primitive the packed buffer removes it. Measured on an AMX Xeon, one thread, bf16
// 128x4096x64 (an FP8 chunk over TCP): 53 us per call with plain b, 34.5 us packed, plus
// 11 us to pack once; 1024x4096x4096: 51.2 ms plain, 46.4 ms packed, pack 2.4-2.8 ms.
// Not for one call of a few rows: 2x256x256 ran 4.9 us plain against 3.0 (pack) + 2.8.
// oneDNN's own reorder primitive writes the same bytes but took 11 us for 256x256 bf16
// (our loop: 3 us), so this file packs itself and checks its bytes against that reorder
// in the tests.
//
// The layouts handled are those oneDNN's brgemm matmul chooses for 16-bit weights: inner
// blocks (k_block along k, n_block along n, pair along k), pair = 2 (two consecutive k of
// one column side by side), outer order n blocks then k blocks, both dimensions zero-padded
// to their block; and the same with pair = 4 for int8 weights (AMX-INT8 / VNNI:
// BA16a64b4a), which pack_b_s8 writes for the integer GEMM (int_matmul.hpp: b_packed) —
// oneDNN's reorder took 7-9 ms for 4096x4096 int8 on the AMX Xeon. Without AMX the s8 x s8
// kernel (VNNI multiplies u8 by s8) adds 128 to a and takes 128 * sum_k b(k, j) back off
// each column: that compensation is an int32 per column after the blocks, which pack_b_s8
// writes too. oneDNN 2.6 reorders into that layout with its generic `simple:any` loop:
// 120 ms for 4096x4096 int8, one thread, AMD EPYC Zen 4 — more than the GEMM then saves
// (186 ms over plain b, 154 over packed b, 2048 rows). Any other layout is reported as
// unsupported and the caller keeps plain b (or oneDNN's reorder).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/cpu/matmul.hpp"

namespace commfuse::kernels::cpu {

struct PackedLayout {
  int64_t k_block = 0;   // k values per inner block (counted in pairs: k_block * pair rows)
  int64_t n_block = 0;   // columns per inner block
  int64_t pair = 0;      // consecutive k values stored together (2 for 16-bit, 4 for int8)
  int64_t k_stride = 0;  // elements between consecutive k blocks (of k_block * pair rows)
  int64_t n_stride = 0;  // elements between consecutive n blocks
  size_t bytes = 0;      // the whole packed buffer, padding included
  int64_t padded_k = 0;  // k and n rounded up to their blocks (the zeroed padding)
  int64_t padded_n = 0;
  // int8 without AMX: the s8 x s8 compensation, -128 * sum_k b(k, j) as an int32 per
  // column (padded_n of them, the padding's 0), starting at this byte; 0: none.
  size_t comp_offset = 0;

  bool operator==(const PackedLayout&) const = default;
};

// The layout of md (a k x n weights descriptor of bf16/fp16 with pairs, or s8 with quads)
// if this file can pack it.
std::optional<PackedLayout> packed_layout(const dnnl::memory::desc& md);

// dst (layout.bytes, any alignment) = b (k x n row-major with row stride ldb elements, 2-byte
// elements) in `layout`, padding zeroed; k and n are those of the descriptor the layout
// came from.
void pack_b(const PackedLayout& layout, const void* b, int64_t k, int64_t n, int64_t ldb,
            void* dst);

// The same from a transposed b: an (n, k) buffer with row stride ldb (a column's k values
// contiguous). One element at a time: it runs once per PackedWeight, not per call.
void pack_b_transposed(const PackedLayout& layout, const void* b, int64_t k, int64_t n, int64_t ldb,
                       void* dst);

// The same for int8 b (layout.pair == 4): b is k x n row-major with row stride ldb, or, when
// transposed, an (n, k) buffer with row stride ldb; and the compensation where the layout
// has one (comp_offset).
void pack_b_s8(const PackedLayout& layout, const int8_t* b, int64_t k, int64_t n, int64_t ldb,
               bool transposed, void* dst);

// Whether an execute whose GEMMs over one x2 take up to max_rows rows (0: several calls,
// e.g. blocks multiplied as they arrive) packs that x2 once: several calls, or one of at
// least 64 rows (128 rows of k = 4096, n = 64 ran 53 us plain, 34.5 us packed + 11 us to
// pack once; 16 rows of k = n = 4096 gained nothing). COMMFUSE_PACK_X2 pins it.
bool packing_pays(int64_t max_rows);

// The layout the plan of d, asked to read b packed (d.b_packed), reads b in; none where
// that plan reads b row-major (matmul.hpp: b_packed).
std::optional<PackedLayout> layout_for(MatmulDesc d);

}  // namespace commfuse::kernels::cpu
