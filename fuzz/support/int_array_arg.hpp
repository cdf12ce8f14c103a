// alltoAllAxesOptional decoded from the input: nullptr (the usual), [-2, -1], [-1, -2], an
// empty array, or up to 79 decoded values (more than commfuseCreateIntArray's 64 too).
#pragma once

#include <commfuse/commfuse.h>

#include "support/byte_reader.hpp"

namespace commfuse_fuzz {

class IntArrayArg {
 public:
  explicit IntArrayArg(ByteReader& r);
  ~IntArrayArg();
  IntArrayArg(const IntArrayArg&) = delete;
  IntArrayArg& operator=(const IntArrayArg&) = delete;

  const commfuseIntArray_t* get() const { return array_; }

 private:
  commfuseIntArray_t* array_ = nullptr;
};

}  // namespace commfuse_fuzz
