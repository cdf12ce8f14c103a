#include "support/tensor_arg.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "support/check.hpp"
#include "support/decode.hpp"

namespace commfuse_fuzz {
namespace {

using int128 = __int128;

// Where unbacked descriptors point: any access faults, so an op that reads data before
// execution is caught instead of reading a stranger's heap.
void* guard_page() {
  static void* const page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return page;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// fp32 values that sit on the formats' edges; converted (non-saturating) into the dtype.
constexpr float kSpecials[] = {
    __builtin_nanf(""),
    __builtin_inff(),
    -__builtin_inff(),
    3.4028235e38f,
    -3.4028235e38f,
    65504.0f,
    448.0f,
    57344.0f,
    32768.0f,
    40960.0f,
    1e-40f,
    -0.0f,
    0.0f,
    1.0f,
    -1.0f,
    127.5f,
    2147483648.0f,
    -9.2233720e18f,
};

bool is_number_format(commfuseDataType t) {
  return t != COMMFUSE_UINT8 && t != COMMFUSE_INT16 && t != COMMFUSE_UINT16 && t != COMMFUSE_BOOL;
}

}  // namespace

TensorArg::TensorArg(ByteReader& r, Role role, const Canonical& usual) : role_(role) {
  decode(r, usual);
}

TensorArg::~TensorArg() {
  if (desc_ != nullptr)
    FUZZ_REQUIRE(commfuseDestroyTensor(desc_) == COMMFUSE_SUCCESS, "commfuseDestroyTensor: %s",
                 commfuseGetLastErrorMessage());
}

void TensorArg::decode(ByteReader& r, const Canonical& usual) {
  const uint8_t flags = r.u8();
  // Bit 0 flips the argument's usual presence; absent: the op gets nullptr.
  if (usual.present == static_cast<bool>(flags & 1)) return;
  const bool explicit_strides = flags & 2, transpose = flags & 8;
  null_data_ = flags & 4;
  const uint8_t fill_mode = (flags >> 4) & 3;
  dtype_ = (flags & 0x40) ? decode_dtype(r) : usual.dtype;
  int dims = 0;
  if (flags & 0x80) {
    const uint8_t n = r.u8();
    ndim_ = n < 0xE0 ? 1 + n % 4 : n < 0xF0 ? n - 0xE0 : n < 0xFF ? 8 + (n & 1) : r.u64();
    dims = static_cast<int>(std::min<uint64_t>(ndim_, 16));
    for (int i = 0; i < dims; ++i) shape_[i] = decode_dim(r);
  } else {
    ndim_ = usual.shape.size();
    dims = static_cast<int>(ndim_);
    for (int i = 0; i < dims; ++i) shape_[i] = usual.shape[static_cast<size_t>(i)];
  }
  if (explicit_strides) {
    for (int i = 0; i < dims; ++i) strides_[i] = decode_stride(r);
    pass_strides_ = true;
  } else if (transpose && dims == 2) {  // an (n, k) buffer viewed as (k, n)
    strides_[0] = 1;
    strides_[1] = shape_[0];
    pass_strides_ = true;
  } else {
    // What commfuseCreateTensor derives for NULL strides (wrapping where it would overflow).
    uint64_t contiguous = 1;
    for (int i = dims - 1; i >= 0; --i) {
      strides_[i] = static_cast<int64_t>(contiguous);
      contiguous *= static_cast<uint64_t>(shape_[i]);
    }
  }
  const uint64_t seed = r.u8() | static_cast<uint64_t>(r.pos()) << 8;

  bool valid = ndim_ >= 1 && ndim_ <= 8 && is_commfuse_dtype(dtype_);
  for (int i = 0; valid && i < static_cast<int>(ndim_); ++i) valid = shape_[i] >= 0;
  if (valid) {
    FUZZ_REQUIRE(commfuseDataTypeBits(dtype_, &bits_) == COMMFUSE_SUCCESS,
                 "commfuseDataTypeBits(%d): %s", static_cast<int>(dtype_),
                 commfuseGetLastErrorMessage());
    valid = size_fits_int64();
  }
  if (valid) back();
  if (backed_) {
    if (role_ == Role::kOutput)
      fill(kUntouched);
    else
      fill_input(fill_mode, seed);
  }
  create();
  // commfuse.h: NULL exactly on a bad argument (ndim outside 1..8, unknown dtype, a negative
  // dim, more than 2^63 - 1 bytes); strides and data are the caller's business.
  FUZZ_REQUIRE(present() == valid, "commfuseCreateTensor(ndim %llu, dtype %d) %s: %s",
               static_cast<unsigned long long>(ndim_), static_cast<int>(dtype_),
               present() ? "accepted a bad descriptor" : "rejected a good descriptor",
               commfuseGetLastErrorMessage());
  if (!valid)
    check_named_failure("commfuseCreateTensor", COMMFUSE_PARAM_INVALID, "commfuseCreateTensor",
                        nullptr);
}

bool TensorArg::size_fits_int64() const {
  int128 bytes = 1;
  for (uint64_t i = 0; i < ndim_; ++i) {
    if (shape_[i] > 0) bytes *= shape_[i];
    if (bytes > INT64_MAX) return false;
  }
  return bytes * std::max(bits_ / 8, 1) <= INT64_MAX;
}

void TensorArg::back() {
  const int dims = static_cast<int>(ndim_);
  bool empty = false;
  for (int i = 0; i < dims; ++i) empty = empty || shape_[i] == 0;
  if (empty) {  // no element to read or write; still a real pointer
    bytes_ = 16;
    buffer_ = std::make_unique<uint8_t[]>(bytes_);
    backed_ = true;
    return;
  }
  // The lowest and highest element offsets the descriptor reaches.
  constexpr int128 kHuge = int128{1} << 100;
  int128 lo = 0, hi = 0;
  for (int i = 0; i < dims; ++i) {
    const int128 extent = static_cast<int128>(shape_[i] - 1) * strides_[i];
    if (extent > kHuge || extent < -kHuge) return;
    (extent < 0 ? lo : hi) += extent;
  }
  int128 bytes = 0, offset = 0;
  if (bits_ == 4) {  // element e lives in byte floor(e / 2)
    bytes = (hi >> 1) - (lo >> 1) + 1;
    offset = -(lo >> 1);
  } else {
    bytes = (hi - lo + 1) * (bits_ / 8);
    offset = -lo * (bits_ / 8);
  }
  if (bytes > static_cast<int128>(kMaxBackedBytes)) return;
  bytes_ = static_cast<size_t>(bytes);
  data_offset_ = static_cast<int64_t>(offset);
  buffer_ = std::make_unique<uint8_t[]>(bytes_);
  backed_ = true;
}

void TensorArg::create() {
  void* data = backed_ ? buffer_.get() + data_offset_ : guard_page();
  if (null_data_) data = nullptr;
  desc_ = commfuseCreateTensor(shape_, ndim_, pass_strides_ ? strides_ : nullptr, dtype_, data);
}

void TensorArg::fill_input(uint8_t mode, uint64_t seed) {
  uint8_t* b = buffer_.get();
  if (mode == 2) {
    std::memset(b, 0, bytes_);
  } else if (mode == 1 || !is_number_format(dtype_)) {
    for (size_t i = 0; i < bytes_; ++i) b[i] = static_cast<uint8_t>(splitmix64(seed));
  } else if (mode == 0 && dtype_ == COMMFUSE_FLOAT8_E8M0) {
    // Scales near 2^0 (E8M0 has no zero: small integers would be NaN or tiny).
    for (size_t i = 0; i < bytes_; ++i) b[i] = static_cast<uint8_t>(120 + splitmix64(seed) % 15);
  } else {
    // Small integers (exact in every format) or edge values, converted into the dtype.
    const size_t count = bytes_ * 8 / static_cast<size_t>(bits_);
    std::vector<float> values(count);
    for (float& v : values) {
      const uint64_t x = splitmix64(seed);
      v = mode == 0 ? static_cast<float>(static_cast<int>(x % 9) - 4)
                    : kSpecials[x % std::size(kSpecials)];
    }
    const commfuseStatus_t st =
        commfuseConvert(values.data(), COMMFUSE_FLOAT32, b, dtype_, count, 0);
    FUZZ_REQUIRE(st == COMMFUSE_SUCCESS, "commfuseConvert(float32 -> %d) while filling: %s",
                 static_cast<int>(dtype_), commfuseGetLastErrorMessage());
  }
  snapshot_.assign(b, b + bytes_);
}

int64_t TensorArg::numel() const {
  if (desc_ == nullptr) return 0;
  int128 n = 1;
  for (uint64_t i = 0; i < ndim_; ++i) {
    n *= shape_[i];
    if (n == 0) return 0;
    if (n > INT64_MAX) n = INT64_MAX;
  }
  return static_cast<int64_t>(n);
}

int64_t TensorArg::dim(int i) const {
  return desc_ != nullptr && i >= 0 && static_cast<uint64_t>(i) < ndim_ ? shape_[i] : 0;
}

void TensorArg::fill(uint8_t byte) {
  if (backed_) std::memset(buffer_.get(), byte, bytes_);
}

bool TensorArg::all_bytes(uint8_t byte) const {
  if (!backed_) return true;
  return std::all_of(buffer_.get(), buffer_.get() + bytes_,
                     [byte](uint8_t b) { return b == byte; });
}

bool TensorArg::unchanged() const {
  return !backed_ || std::memcmp(buffer_.get(), snapshot_.data(), bytes_) == 0;
}

std::vector<uint8_t> TensorArg::elements() const {
  std::vector<uint8_t> out;
  const int64_t n = numel();
  if (desc_ == nullptr || null_data_ || !backed_ || n == 0) return out;
  const int dims = static_cast<int>(ndim_);
  const uint8_t* data = buffer_.get() + data_offset_;
  const int elem_bytes = bits_ / 8;
  int64_t idx[16] = {};
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int i = 0; i < dims; ++i) off += idx[i] * strides_[i];
    if (bits_ == 4) {
      const uint8_t byte = data[off >> 1];
      out.push_back((off & 1) ? byte >> 4 : byte & 0x0F);
    } else {
      out.insert(out.end(), data + off * elem_bytes, data + (off + 1) * elem_bytes);
    }
    for (int i = dims - 1; i >= 0 && ++idx[i] == shape_[i]; --i) idx[i] = 0;
  }
  return out;
}

}  // namespace commfuse_fuzz
