// One tensor argument decoded from the input: a C descriptor (or nullptr) over memory this
// object owns. By default it is what a valid call passes (the target's Canonical, derived
// from the problem dims it decoded first), so one mutated byte changes one argument; flag
// bits replace its presence, dtype, shape or strides with decoded ones. The memory covers
// every element the descriptor claims, so whatever an op accepts it may read or write; a
// descriptor claiming more than kMaxBackedBytes (huge or overflowing shapes) points at an
// inaccessible page instead and is only planned, never executed (an op may not touch data
// before it executes).
#pragma once

#include <commfuse/commfuse.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "support/byte_reader.hpp"

namespace commfuse_fuzz {

enum class Role { kInput, kOutput };

// The argument as a valid call passes it.
struct Canonical {
  commfuseDataType dtype;
  std::vector<int64_t> shape;
  bool present = true;  // false: the usual value is NULL (an optional argument)
};

class TensorArg {
 public:
  static constexpr size_t kMaxBackedBytes = size_t{1} << 20;
  static constexpr uint8_t kUntouched = 0xCD;  // outputs hold this until an op writes them

  // Layout: flags, [dtype], [ndim, dims], [strides], seed (fuzz/README.md).
  TensorArg(ByteReader& r, Role role, const Canonical& usual);
  ~TensorArg();
  TensorArg(const TensorArg&) = delete;
  TensorArg& operator=(const TensorArg&) = delete;

  const commfuseTensor_t* get() const { return desc_; }
  bool present() const { return desc_ != nullptr; }
  Role role() const { return role_; }
  // Absent, or present over real memory (see above).
  bool backed() const { return desc_ == nullptr || backed_; }
  // Elements the descriptor claims; 0 when absent, INT64_MAX when that overflows.
  int64_t numel() const;
  // shape[i], or 0 if absent or i is past ndim.
  int64_t dim(int i) const;

  // Outputs: every byte set to `byte`; whether every byte still holds it.
  void fill(uint8_t byte);
  bool all_bytes(uint8_t byte) const;
  // Inputs: whether the memory still holds what it was filled with.
  bool unchanged() const;
  // The bytes of every element in index order (int4: one nibble per entry).
  std::vector<uint8_t> elements() const;

 private:
  void decode(ByteReader& r, const Canonical& usual);
  bool size_fits_int64() const;
  void create();
  void back();
  void fill_input(uint8_t mode, uint64_t seed);

  Role role_;
  commfuseTensor_t* desc_ = nullptr;
  commfuseDataType dtype_ = COMMFUSE_FLOAT32;
  uint64_t ndim_ = 0;
  int64_t shape_[16] = {};
  int64_t strides_[16] = {};
  bool pass_strides_ = false, null_data_ = false, backed_ = false;
  int bits_ = 0;
  std::unique_ptr<uint8_t[]> buffer_;
  size_t bytes_ = 0;
  int64_t data_offset_ = 0;  // bytes from buffer_ to element 0
  std::vector<uint8_t> snapshot_;
};

}  // namespace commfuse_fuzz
