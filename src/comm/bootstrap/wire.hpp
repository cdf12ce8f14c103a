// The bootstrap's message format: length-prefixed frames with a fixed little-endian header,
// so processes on different machines (and compilers) agree byte for byte.
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/bootstrap/socket.hpp"

namespace commfuse::comm::wire {

// Every frame starts with this, so a stray client (port scanner, wrong service) is
// recognised on its first bytes instead of being read as a length.
constexpr uint32_t kMagic = 0x53424643;  // "CFBS" in little-endian byte order
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 20;  // magic u32, type u32, seq u32, length u64
// Payload cap: a corrupt length must not turn into a giant allocation. Bootstrap blobs
// are small; this leaves room for large groups times generous blobs.
constexpr uint64_t kMaxPayload = uint64_t{4} << 30;
constexpr uint64_t kMaxHelloPayload = 64;

enum class FrameType : uint32_t {
  kHello = 1,      // peer -> rank 0: version, rank, world_size
  kWelcome = 2,    // rank 0 -> peer: the group is complete
  kError = 3,      // rank 0 -> peer: status + message; the group is dead
  kAllGather = 4,  // peer -> rank 0: this rank's blob
  kBarrier = 5,    // peer -> rank 0: empty
  kResult = 6,     // rank 0 -> peer: all blobs in rank order
};
const char* frame_name(FrameType t);

struct Frame {
  FrameType type = FrameType::kError;
  uint32_t seq = 0;  // collective call number, to catch ranks that went out of step
  std::string payload;
};

// Reads one frame from a non-blocking socket a piece at a time, so rank 0 can serve many
// peers from one poll() loop.
class FrameReader {
 public:
  explicit FrameReader(uint64_t max_payload = kMaxPayload) : max_payload_(max_payload) {}
  // Consumes whatever is available. kOk: a frame is complete (see done()/take());
  // kWouldBlock: more bytes needed; kClosed: EOF or reset; kError: errno in *err, or a
  // malformed header (*err = 0).
  net::Io feed(int fd, int* err);
  bool done() const { return done_; }
  Frame take();

 private:
  uint64_t max_payload_;
  char header_[kHeaderBytes] = {};
  size_t header_got_ = 0;
  size_t payload_got_ = 0;
  uint64_t length_ = 0;  // the header's payload length
  bool done_ = false;
  Frame frame_;
};

// Sends one frame; kWouldBlock means the deadline passed.
net::Io send_frame(int fd, FrameType type, uint32_t seq, std::string_view payload,
                   net::Deadline deadline, int* err);
// Receives one frame; kWouldBlock means the deadline passed.
net::Io recv_frame(int fd, Frame* out, net::Deadline deadline, int* err,
                   uint64_t max_payload = kMaxPayload);

struct Hello {
  uint32_t version = 0;
  int32_t rank = -1;
  int32_t world_size = -1;
};
std::string encode_hello(int rank, int world_size);
bool decode_hello(const std::string& payload, Hello* out);

std::string encode_error(Status code, const std::string& message);
bool decode_error(const std::string& payload, Status* code, std::string* message);

std::string encode_blobs(const std::vector<std::string>& blobs);
bool decode_blobs(const std::string& payload, size_t count, std::vector<std::string>* out);

}  // namespace commfuse::comm::wire
