#include "support/quant_problem.hpp"

#include "support/decode.hpp"

namespace commfuse_fuzz {

QuantProblem::QuantProblem(ByteReader& r) {
  constexpr commfuseDataType kKgCodes[] = {COMMFUSE_INT8, COMMFUSE_HIFLOAT8, COMMFUSE_FLOAT8_E4M3FN,
                                           COMMFUSE_FLOAT8_E5M2};
  constexpr commfuseDataType kOutputs[] = {COMMFUSE_FLOAT32, COMMFUSE_FLOAT16, COMMFUSE_BFLOAT16};
  const uint8_t format = r.u8();
  const bool mx = format % 6 >= 4;
  x_dtype =
      mx ? (format % 2 ? COMMFUSE_FLOAT8_E5M2 : COMMFUSE_FLOAT8_E4M3FN) : kKgCodes[format % 6];
  scale_dtype = mx ? COMMFUSE_FLOAT8_E8M0 : COMMFUSE_FLOAT32;
  out_dtype = kOutputs[format / 6 % 3];
  const int64_t bs = decode_size(r, 2);
  const int64_t unit = mx ? 64 : 128;  // H per scale row entry (MX: two scales of 32)
  const int64_t groups = 1 + r.u8() % 16;
  const int64_t h = groups * unit, batch = decode_size(r, 0);
  std::vector<int64_t> lead{bs};
  if (batch > 0) lead = {batch, bs};
  x_shape = lead;
  x_shape.push_back(h);
  scale_shape = lead;
  scale_shape.push_back(groups);
  if (mx) scale_shape.push_back(2);
  // (b·bs, H) at W = 1, wrapping like the library would not: a huge product just makes a
  // descriptor the plan must reject.
  scattered_shape = {static_cast<int64_t>(static_cast<uint64_t>(bs) *
                                          static_cast<uint64_t>(batch > 0 ? batch : 1)),
                     h};
}

}  // namespace commfuse_fuzz
