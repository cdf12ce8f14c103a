// The interface every transport implements (shm on one host, MPI across hosts). A
// communicator owns one transport; collectives and, later, fused ops call it.
//
// Contract for every call:
// - It is collective: every rank of the communicator calls it with matching arguments.
//   The transport checks that they match (a small descriptor travels with the data) and
//   fails with RUNTIME_ERROR naming the mismatch instead of hanging or corrupting data.
// - Every wait has a deadline (COMMFUSE_TIMEOUT_S); on expiry RUNTIME_ERROR names the op,
//   this rank and the ranks that did not arrive. A dead peer is reported as soon as it is
//   noticed.
// - After any failure the transport is aborted: later calls fail fast with RUNTIME_ERROR.
// - Reductions sum in fp32 (integers: exactly, in int64) in rank order 0..R-1, so every
//   rank gets bitwise-identical results (SPEC §0).
#pragma once

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace commfuse::comm {

enum class CollOp : uint32_t {
  kBarrier = 1,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kAllToAll,
};
const char* coll_op_name(CollOp op);

// What a rank says it is doing; compared across ranks before data is combined.
struct CollDesc {
  CollOp op = CollOp::kBarrier;
  DType dtype = DType::kInt8;
  uint64_t count = 0;  // elements: per rank (all_gather, reduce_scatter output), per peer
                       // (all_to_all), total (all_reduce, broadcast)
  int32_t root = -1;   // broadcast only

  bool operator==(const CollDesc&) const = default;
};
// "all_reduce count 1024 bfloat16"
std::string describe(const CollDesc& d);

// Checks every transport makes at the start of a collective: RUNTIME_ERROR if an earlier
// failure left the transport unusable (failure is its message, empty if none), and
// PARAM_INVALID if a sum was asked of a dtype that cannot be summed.
void check_usable(const char* op, int rank, const std::string& failure);
void check_reducible(const char* op, int rank, DType dtype);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;  // "shm", "mpi"

  virtual void barrier() = 0;
  // buf holds count elements of dtype; on return every rank has root's data.
  virtual void broadcast(void* buf, uint64_t count, DType dtype, int root) = 0;
  // src: count elements; dst: R * count, rank s's block at [s * count, (s + 1) * count).
  virtual void all_gather(const void* src, void* dst, uint64_t count, DType dtype) = 0;
  // src: R * count elements, block s goes to rank s; dst: count elements = the rank-order sum
  // of every rank's block r.
  virtual void reduce_scatter(const void* src, void* dst, uint64_t count, DType dtype) = 0;
  // src and dst: count elements; dst = rank-order sum over ranks. src may equal dst.
  virtual void all_reduce(const void* src, void* dst, uint64_t count, DType dtype) = 0;
  // src: R * count, block s goes to rank s; dst: R * count, block s came from rank s.
  virtual void all_to_all(const void* src, void* dst, uint64_t count, DType dtype) = 0;

  // Marks this rank failed (e.g. it rejected its arguments) so that peers waiting for it
  // fail promptly with this reason instead of waiting for the deadline.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace commfuse::comm
