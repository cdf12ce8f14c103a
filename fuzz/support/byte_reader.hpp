// Reads a fuzz input front to back. Past the end every read is zero, so a truncated input
// still decodes: the formats (decode.hpp) give zero bytes their most ordinary meaning.
#pragma once

#include <cstddef>
#include <cstdint>

namespace commfuse_fuzz {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() {
    const uint16_t lo = u8();
    return static_cast<uint16_t>(lo | u8() << 8);
  }
  uint32_t u32() {
    const uint32_t lo = u16();
    return lo | static_cast<uint32_t>(u16()) << 16;
  }
  uint64_t u64() {
    const uint64_t lo = u32();
    return lo | static_cast<uint64_t>(u32()) << 32;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }

  // How many bytes were read so far (a deterministic seed for generated data).
  size_t pos() const { return pos_; }

  // The unread bytes (consumed by the call).
  const uint8_t* take_rest(size_t* size) {
    const uint8_t* p = data_ + pos_;
    *size = size_ - pos_;
    pos_ = size_;
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace commfuse_fuzz
