#include "comm/transport.hpp"

#include <new>

#include "comm/call_check.hpp"
#include "core/error.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/reduce.hpp"

namespace commfuse::comm {

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::kBarrier:
      return "barrier";
    case CollOp::kBroadcast:
      return "broadcast";
    case CollOp::kAllGather:
      return "all_gather";
    case CollOp::kReduceScatter:
      return "reduce_scatter";
    case CollOp::kAllReduce:
      return "all_reduce";
    case CollOp::kAllToAll:
      return "all_to_all";
    case CollOp::kGatherStream:
      return "gather_stream";
    case CollOp::kAllToAllStream:
      return "all_to_all_stream";
  }
  return "unknown_collective";
}

std::string describe(const CollDesc& d) {
  if (d.op == CollOp::kBarrier) return "barrier";
  std::string dtype = "dtype#" + std::to_string(static_cast<int>(d.dtype));
  try {
    dtype = std::string(dtype_name(d.dtype));
  } catch (const Error&) {
  }
  std::string s = detail::cat(coll_op_name(d.op), " count ", d.count, " ", dtype);
  if (d.op == CollOp::kBroadcast) s += detail::cat(" root ", d.root);
  if (d.piece != 0) s += detail::cat(" piece ", d.piece);
  if (d.algo != CollAlgo::kDefault) s += detail::cat(" (", coll_algo_name(d.algo), ")");
  return s;
}

bool copy_if_overlapping(const void** src, size_t src_bytes, const void* dst, size_t dst_bytes,
                         std::unique_ptr<uint8_t[]>& staged) {
  if (!ranges_overlap(*src, src_bytes, dst, dst_bytes)) return true;
  staged.reset(new (std::nothrow) uint8_t[src_bytes]);
  if (!staged) return false;
  kernels::cpu::copy(staged.get(), *src, src_bytes);
  *src = staged.get();
  return true;
}

const char* coll_algo_name(CollAlgo a) {
  switch (a) {
    case CollAlgo::kDefault:
      return "slots";
    case CollAlgo::kCma:
      return "cma";
    case CollAlgo::kOneShot:
      return "one_shot";
    case CollAlgo::kTwoShot:
      return "two_shot";
  }
  return "unknown algorithm";
}

void check_usable(const char* op, int rank, const Failure& failure) {
  if (!failure.failed()) return;
  try {
    detail::throw_status(
        Status::kRuntimeError,
        detail::cat(op, "(rank ", rank,
                    "): communicator is unusable after an earlier failure: ", failure.reason()));
  } catch (const Error&) {
    rethrow_in_call();  // inside an operator, its name first (op may be its inner stream's)
  }
}

void throw_busy(const char* op, int rank) {
  detail::throw_status(Status::kRuntimeError,
                       detail::cat(op, "(rank ", rank,
                                   "): another thread is in a call on this communicator (its "
                                   "calls must come from one thread at a time)"));
}

void check_reducible(const char* op, int rank, DType dtype) {
  CF_CHECK_ARG(kernels::cpu::reducible(dtype), op, "(rank ", rank, "): dtype ", dtype_name(dtype),
               " cannot be summed (only ", kernels::cpu::reducible_names(), ")");
}

}  // namespace commfuse::comm
