// The half of the bootstrap run by ranks other than 0: joining the group and taking part
// in collectives through the one connection to rank 0.
#include <algorithm>
#include <thread>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/bootstrap_internal.hpp"
#include "comm/interrupt.hpp"
#include "core/error.hpp"

namespace commfuse::comm {
namespace {

// Messages from rank 0 carry at most an error text until the group has formed; a bigger
// length means whatever listens on the port is not a commfuse rank 0.
constexpr uint64_t kMaxJoinPayload = 1 << 20;

}  // namespace

void Bootstrap::peer_fail(Status code, const std::string& message) {
  root_.reset();
  broken_ = message;
  detail::throw_status(code, message);
}

void Bootstrap::peer_join() {
  const std::string where = net::host_port(host_, port_);
  // Ctrl-C inside a connect attempt names the rank and rank 0's address too.
  const net::WaitContext reaching(who(), detail::cat("trying to reach rank 0 at ", where));
  const net::Deadline connect_by = net::Deadline::after(std::chrono::seconds(timeout_s_));
  // Rank 0 may start later than we do: retry, backing off so a slow start costs few attempts.
  std::chrono::milliseconds backoff{10};
  std::string last_error;
  comm::InterruptPoll interrupt;  // Ctrl-C while rank 0 is not there (not started)
  for (;;) {
    root_ = net::connect_tcp(host_, port_, connect_by, &last_error);
    if (root_.valid()) break;
    if (const std::string why = interrupt.poll(); !why.empty())
      peer_fail(Status::kRuntimeError,
                detail::cat(who(), ": ",
                            comm::interrupted_message(
                                why, detail::cat("trying to reach rank 0 at ", where))));
    if (connect_by.expired())
      peer_fail(Status::kRuntimeError,
                detail::cat(who(), ": could not reach rank 0 at ", where, " within ", timeout_s_,
                            " s (last error: ", last_error, ")"));
    const auto left = connect_by.at() - net::Deadline::Clock::now();
    std::this_thread::sleep_for(std::min<net::Deadline::Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
  }

  // Rank 0 started its clock no later than it began listening, i.e. before we connected:
  // waiting timeout_s + grace from now outlasts it, so its verdict reaches us first.
  const net::Deadline answer_by =
      net::Deadline::after(std::chrono::seconds(timeout_s_) + boot::kPeerGrace);
  const net::WaitContext waiting(
      who(), detail::cat("waiting for rank 0 at ", where, " to confirm the group"));
  int err = 0;
  net::Io io = wire::send_frame(root_.get(), wire::FrameType::kHello, 0,
                                wire::encode_hello(rank_, world_size_), answer_by, &err);
  wire::Frame f;
  if (io == net::Io::kOk) io = wire::recv_frame(root_.get(), &f, answer_by, &err, kMaxJoinPayload);
  if (io == net::Io::kWouldBlock)
    peer_fail(Status::kRuntimeError,
              detail::cat(who(), ": rank 0 at ", where, " did not confirm the group within ",
                          timeout_s_, " s"));
  if (io == net::Io::kError && err == 0)
    peer_fail(
        Status::kRuntimeError,
        detail::cat(who(), ": ", where,
                    " did not answer like a commfuse rank 0 (another service on that port?)"));
  if (io != net::Io::kOk)
    peer_fail(Status::kRuntimeError,
              detail::cat(who(), ": rank 0 at ", where, " closed the connection before the ",
                          "group formed (", boot::io_reason(io, err), ")"));
  Status code;
  std::string message;
  if (f.type == wire::FrameType::kError && wire::decode_error(f.payload, &code, &message))
    peer_fail(code, message);
  if (f.type != wire::FrameType::kWelcome)
    peer_fail(Status::kRuntimeError,
              detail::cat(who(), ": rank 0 at ", where, " answered the hello with a ",
                          wire::frame_name(f.type), " message"));
}

std::vector<std::string> Bootstrap::peer_collective(wire::FrameType op, const std::string& blob) {
  const char* op_name = wire::frame_name(op);
  // The grace lets rank 0's verdict (naming a dead or late rank) arrive before our timer.
  const net::Deadline deadline =
      net::Deadline::after(std::chrono::seconds(timeout_s_) + boot::kPeerGrace);
  const net::WaitContext waiting(
      who(), detail::cat("waiting for rank 0's answer to ", op_name, " #", seq_));
  int err = 0;
  net::Io io = wire::send_frame(root_.get(), op, seq_, blob, deadline, &err);
  wire::Frame f;
  // Even when our send failed, rank 0 may have left an error message before closing:
  // look for it without waiting, since its message is better than ours.
  int recv_err = 0;
  const net::Io recv_io = wire::recv_frame(
      root_.get(), &f, io == net::Io::kOk ? deadline : net::Deadline::after({}), &recv_err);
  if (recv_io == net::Io::kOk && f.type == wire::FrameType::kError) {
    Status code;
    std::string message;
    if (wire::decode_error(f.payload, &code, &message)) peer_fail(code, message);
  }
  if (io == net::Io::kOk) {
    io = recv_io;
    err = recv_err;
  }
  if (io == net::Io::kWouldBlock)
    peer_fail(Status::kRuntimeError, detail::cat(who(), ": rank 0 did not answer ", op_name, " #",
                                                 seq_, " within ", timeout_s_, " s"));
  if (io != net::Io::kOk)
    peer_fail(Status::kRuntimeError, detail::cat(who(), ": lost connection to rank 0 during ",
                                                 op_name, " (", boot::io_reason(io, err), ")"));
  if (f.type != wire::FrameType::kResult || f.seq != seq_)
    peer_fail(Status::kInner, detail::cat(who(), ": expected the result of ", op_name, " #", seq_,
                                          " from rank 0 but got a ", wire::frame_name(f.type),
                                          " message for #", f.seq));
  if (op == wire::FrameType::kBarrier) return {};
  std::vector<std::string> blobs;
  if (!wire::decode_blobs(f.payload, static_cast<size_t>(world_size_), &blobs))
    peer_fail(Status::kInner, detail::cat(who(), ": malformed ", op_name, " result from rank 0 (",
                                          f.payload.size(), " bytes for ", world_size_, " blobs)"));
  return blobs;
}

}  // namespace commfuse::comm
