#include "comm/bootstrap/wire.hpp"

#include <algorithm>
#include <cstring>

namespace commfuse::comm::wire {
namespace {

// Frames below this size go out as one send() (one TCP segment with TCP_NODELAY); larger
// payloads are sent from the caller's buffer to avoid copying them.
constexpr size_t kCoalesceBytes = 64 * 1024;

void put_u32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

bool known_type(uint32_t t) {
  return t >= static_cast<uint32_t>(FrameType::kHello) &&
         t <= static_cast<uint32_t>(FrameType::kResult);
}

bool known_status(int32_t c) {
  switch (static_cast<Status>(c)) {
    case Status::kParamNullptr:
    case Status::kParamInvalid:
    case Status::kRuntimeError:
    case Status::kInner:
      return true;
    case Status::kSuccess:
      break;
  }
  return false;
}

}  // namespace

const char* frame_name(FrameType t) {
  switch (t) {
    case FrameType::kHello:
      return "hello";
    case FrameType::kWelcome:
      return "welcome";
    case FrameType::kError:
      return "error";
    case FrameType::kAllGather:
      return "all_gather";
    case FrameType::kBarrier:
      return "barrier";
    case FrameType::kResult:
      return "result";
  }
  return "unknown";
}

net::Io FrameReader::feed(int fd, int* err) {
  while (!done_) {
    size_t got = 0;
    net::Io io;
    if (header_got_ < kHeaderBytes) {
      io = net::recv_some(fd, header_ + header_got_, kHeaderBytes - header_got_, &got, err);
      if (io != net::Io::kOk) return io;
      header_got_ += got;
      if (header_got_ < kHeaderBytes) continue;
      const uint32_t type = get_u32(header_ + 4);
      const uint64_t length = get_u64(header_ + 12);
      if (get_u32(header_) != kMagic || !known_type(type) || length > max_payload_) {
        *err = 0;
        return net::Io::kError;
      }
      frame_.type = static_cast<FrameType>(type);
      frame_.seq = get_u32(header_ + 8);
      length_ = length;
    } else {
      // The buffer grows with the bytes that arrived (doubling from 64 KiB), never to the
      // header's length at once: a corrupt or hostile length costs rank 0 what the peer
      // actually sends, not gigabytes zero-filled before the first payload byte.
      if (payload_got_ == frame_.payload.size())
        frame_.payload.resize(static_cast<size_t>(
            std::min<uint64_t>(length_, std::max<uint64_t>(2 * payload_got_, 64 << 10))));
      io = net::recv_some(fd, frame_.payload.data() + payload_got_,
                          frame_.payload.size() - payload_got_, &got, err);
      if (io != net::Io::kOk) return io;
      payload_got_ += got;
    }
    done_ = header_got_ == kHeaderBytes && payload_got_ == length_;
  }
  return net::Io::kOk;
}

Frame FrameReader::take() {
  Frame f = std::move(frame_);
  frame_ = Frame();
  header_got_ = payload_got_ = 0;
  length_ = 0;
  done_ = false;
  return f;
}

net::Io send_frame(int fd, FrameType type, uint32_t seq, std::string_view payload,
                   net::Deadline deadline, int* err) {
  std::string head;
  head.reserve(kHeaderBytes + (payload.size() < kCoalesceBytes ? payload.size() : 0));
  put_u32(&head, kMagic);
  put_u32(&head, static_cast<uint32_t>(type));
  put_u32(&head, seq);
  put_u64(&head, payload.size());
  if (payload.size() < kCoalesceBytes) {
    head.append(payload);
    return net::send_all(fd, head.data(), head.size(), deadline, err);
  }
  const net::Io io = net::send_all(fd, head.data(), head.size(), deadline, err);
  if (io != net::Io::kOk) return io;
  return net::send_all(fd, payload.data(), payload.size(), deadline, err);
}

net::Io recv_frame(int fd, Frame* out, net::Deadline deadline, int* err, uint64_t max_payload) {
  FrameReader reader(max_payload);
  for (;;) {
    const net::Io io = reader.feed(fd, err);
    if (io == net::Io::kOk) {
      *out = reader.take();
      return io;
    }
    if (io != net::Io::kWouldBlock) return io;
    if (!net::wait_readable(fd, deadline)) return net::Io::kWouldBlock;
  }
}

std::string encode_hello(int rank, int world_size) {
  std::string s;
  put_u32(&s, kVersion);
  put_u32(&s, static_cast<uint32_t>(rank));
  put_u32(&s, static_cast<uint32_t>(world_size));
  return s;
}

bool decode_hello(const std::string& payload, Hello* out) {
  if (payload.size() != 12) return false;
  out->version = get_u32(payload.data());
  out->rank = static_cast<int32_t>(get_u32(payload.data() + 4));
  out->world_size = static_cast<int32_t>(get_u32(payload.data() + 8));
  return true;
}

std::string encode_error(Status code, const std::string& message) {
  std::string s;
  put_u32(&s, static_cast<uint32_t>(code));
  s += message;
  return s;
}

bool decode_error(const std::string& payload, Status* code, std::string* message) {
  if (payload.size() < 4) return false;
  const auto c = static_cast<int32_t>(get_u32(payload.data()));
  if (!known_status(c)) return false;
  *code = static_cast<Status>(c);
  *message = payload.substr(4);
  return true;
}

std::string encode_blobs(const std::vector<std::string>& blobs) {
  size_t total = 0;
  for (const auto& b : blobs) total += 8 + b.size();
  std::string s;
  s.reserve(total);
  for (const auto& b : blobs) {
    put_u64(&s, b.size());
    s += b;
  }
  return s;
}

bool decode_blobs(const std::string& payload, size_t count, std::vector<std::string>* out) {
  out->clear();
  out->reserve(count);
  size_t pos = 0;
  for (size_t i = 0; i < count; ++i) {
    if (payload.size() - pos < 8) return false;
    const uint64_t len = get_u64(payload.data() + pos);
    pos += 8;
    if (len > payload.size() - pos) return false;
    out->emplace_back(payload, pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
  }
  return pos == payload.size();
}

}  // namespace commfuse::comm::wire
