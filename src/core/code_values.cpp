#include "core/code_values.hpp"

#include <array>

#include "core/convert_fast.hpp"
#include "core/error.hpp"

namespace commfuse {
namespace {

using Table = std::array<float, 256>;

Table make_table(DType t) {
  Table v{};
  std::array<uint8_t, 256> codes{};
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  switch (t) {
    case DType::kInt8:
      for (int i = 0; i < 256; ++i) v[i] = static_cast<float>(static_cast<int8_t>(i));
      break;
    case DType::kHiFloat8:
      fast::hif8_to_f32(codes.data(), v.data(), 256);
      break;
    case DType::kFloat8E4M3FN:
      fast::e4m3fn_to_f32(codes.data(), v.data(), 256);
      break;
    case DType::kFloat8E5M2:
      fast::e5m2_to_f32(codes.data(), v.data(), 256);
      break;
    case DType::kFloat8E8M0:
      fast::e8m0_to_f32(codes.data(), v.data(), 256);
      break;
    default:
      CF_ASSERT(false && "code_values: not an 8-bit format");
  }
  return v;
}

}  // namespace

const float* code_values(DType dtype) {
  static const Table i8 = make_table(DType::kInt8);
  static const Table hif8 = make_table(DType::kHiFloat8);
  static const Table e4m3 = make_table(DType::kFloat8E4M3FN);
  static const Table e5m2 = make_table(DType::kFloat8E5M2);
  static const Table e8m0 = make_table(DType::kFloat8E8M0);
  switch (dtype) {
    case DType::kInt8:
      return i8.data();
    case DType::kHiFloat8:
      return hif8.data();
    case DType::kFloat8E4M3FN:
      return e4m3.data();
    case DType::kFloat8E5M2:
      return e5m2.data();
    case DType::kFloat8E8M0:
      return e8m0.data();
    default:
      CF_ASSERT(false && "code_values: not an 8-bit format");
  }
  return nullptr;
}

}  // namespace commfuse
