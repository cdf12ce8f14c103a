#include "support/int_array_arg.hpp"

#include <cstdint>
#include <vector>

#include "support/check.hpp"
#include "support/decode.hpp"

namespace commfuse_fuzz {

IntArrayArg::IntArrayArg(ByteReader& r) {
  const uint8_t sel = r.u8();
  std::vector<int64_t> values;
  bool null_value = false;
  switch (sel) {
    case 0:
      return;  // absent
    case 1:
      values = {-2, -1};
      break;
    case 2:
      values = {-1, -2};
      break;
    case 3:
      break;  // empty
    case 4:   // a size with a null pointer: rejected
      values.resize(1 + r.u8() % 8);
      null_value = true;
      break;
    default:
      values.resize(r.u8() % 80);
      for (int64_t& v : values) v = decode_int(r, -1);
  }
  array_ = commfuseCreateIntArray(null_value ? nullptr : values.data(), values.size());
  // commfuse.h / c_api_alltoall.cpp: at most 64 values, and a pointer when there are any.
  const bool valid = values.size() <= 64 && (values.empty() || !null_value);
  FUZZ_REQUIRE((array_ != nullptr) == valid, "commfuseCreateIntArray(size %zu%s) %s: %s",
               values.size(), null_value ? ", null" : "", valid ? "failed" : "accepted",
               commfuseGetLastErrorMessage());
  if (!valid)
    check_named_failure("commfuseCreateIntArray", COMMFUSE_PARAM_INVALID, "commfuseCreateIntArray",
                        nullptr);
}

IntArrayArg::~IntArrayArg() {
  if (array_ != nullptr)
    FUZZ_REQUIRE(commfuseDestroyIntArray(array_) == COMMFUSE_SUCCESS, "commfuseDestroyIntArray: %s",
                 commfuseGetLastErrorMessage());
}

}  // namespace commfuse_fuzz
