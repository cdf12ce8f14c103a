#include <commfuse/commfuse.hpp>

#include <array>

#include "core/dtype_valid.hpp"
#include "core/error.hpp"

namespace commfuse {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // ml_dtypes / PyTorch spelling
  int bits;
};

constexpr std::array<DTypeInfo, 15> kDTypes{{
    {DType::kFloat32, "float32", 32},
    {DType::kFloat16, "float16", 16},
    {DType::kBFloat16, "bfloat16", 16},
    {DType::kInt8, "int8", 8},
    {DType::kInt4, "int4", 4},
    {DType::kInt32, "int32", 32},
    {DType::kInt64, "int64", 64},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", 8},
    {DType::kFloat8E5M2, "float8_e5m2", 8},
    {DType::kHiFloat8, "hifloat8", 8},
    {DType::kFloat8E8M0, "float8_e8m0", 8},
    // Data movement only (collectives that copy bytes): numpy's and torch's spellings.
    {DType::kUInt8, "uint8", 8},
    {DType::kInt16, "int16", 16},
    {DType::kUInt16, "uint16", 16},
    {DType::kBool, "bool", 8},  // one byte per element, as numpy and torch store it
}};

struct Alias {
  std::string_view alias;
  DType dtype;
};

// Spellings users bring from PyTorch, ml_dtypes, numpy and CANN.
constexpr std::array<Alias, 13> kAliases{{
    {"float", DType::kFloat32},
    {"fp32", DType::kFloat32},
    {"half", DType::kFloat16},
    {"fp16", DType::kFloat16},
    {"bf16", DType::kBFloat16},
    {"float8_e8m0fnu", DType::kFloat8E8M0},
    {"e8m0", DType::kFloat8E8M0},
    {"fp8_e4m3", DType::kFloat8E4M3FN},
    {"fp8_e5m2", DType::kFloat8E5M2},
    {"hif8", DType::kHiFloat8},
    {"int", DType::kInt32},
    {"long", DType::kInt64},
    {"short", DType::kInt16},
}};

const DTypeInfo* find(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return &info;
  return nullptr;
}

const DTypeInfo& lookup(DType dtype) {
  const DTypeInfo* info = find(dtype);
  CF_CHECK_ARG(info != nullptr, "unknown dtype value ", static_cast<int>(dtype));
  return *info;
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  return lookup(dtype).name;
}

DType dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  for (const auto& alias : kAliases)
    if (alias.alias == name) return alias.dtype;
  std::string known;
  for (const auto& info : kDTypes) known += detail::cat(known.empty() ? "" : ", ", info.name);
  detail::throw_status(Status::kParamInvalid,
                       detail::cat("unknown dtype name '", name, "' (known: ", known, ")"));
}

int dtype_bits(DType dtype) {
  return lookup(dtype).bits;
}

size_t dtype_storage_bytes(DType dtype, size_t count) {
  // Whole bytes of every 8 elements, then the rest: no intermediate count of bits, which
  // would overflow 8 times sooner than the bytes do.
  const auto bits = static_cast<size_t>(dtype_bits(dtype));
  size_t bytes = 0;
  if (__builtin_mul_overflow(count / 8, bits, &bytes) ||
      __builtin_add_overflow(bytes, (count % 8 * bits + 7) / 8, &bytes))
    detail::throw_status(Status::kParamInvalid,
                         detail::cat("dtype_storage_bytes: ", count, " ", dtype_name(dtype),
                                     " elements take more bytes than a size_t counts"));
  return bytes;
}

namespace {
bool fits_a_buffer(DType dtype, size_t count) {
  if (count >> 56 == 0) return true;  // 8-byte elements at most: nothing below 2^56 can
  try {
    return dtype_storage_bytes(dtype, count) <= static_cast<size_t>(PTRDIFF_MAX);
  } catch (const Error&) {
    return false;
  }
}
}  // namespace

namespace detail {
std::string count_too_large(std::string_view what, size_t count, DType dtype, size_t blocks,
                            int rank) {
  size_t elements = 0;
  if (!__builtin_mul_overflow(count, blocks, &elements) && fits_a_buffer(dtype, elements))
    return {};
  return cat(what, rank >= 0 ? cat("(rank ", rank, ")") : std::string(), ": count ", count,
             " is too large: ", blocks > 1 ? cat(blocks, " blocks of that many ") : "",
             dtype_name(dtype), " elements exceed the largest buffer (", PTRDIFF_MAX, " bytes)");
}

bool dtype_is_valid(DType dtype) {
  return find(dtype) != nullptr;
}
}  // namespace detail

}  // namespace commfuse
