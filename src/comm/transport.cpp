#include "comm/transport.hpp"

#include "core/error.hpp"
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
  return s;
}

void check_usable(const char* op, int rank, const std::string& failure) {
  if (!failure.empty())
    detail::throw_status(
        Status::kRuntimeError,
        detail::cat(op, "(rank ", rank,
                    "): communicator is unusable after an earlier failure: ", failure));
}

void check_reducible(const char* op, int rank, DType dtype) {
  CF_CHECK_ARG(kernels::cpu::reducible(dtype), op, "(rank ", rank, "): dtype ", dtype_name(dtype),
               " cannot be summed (only ", kernels::cpu::reducible_names(), ")");
}

}  // namespace commfuse::comm
