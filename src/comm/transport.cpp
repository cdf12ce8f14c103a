#include "comm/transport.hpp"

#include "core/error.hpp"

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
  return s;
}

}  // namespace commfuse::comm
