// Collectives between the ranks of one host through their symmetric shared-memory
// regions. Each rank owns a region: a control page (phase counter, op descriptor) and two
// data slots. An operation runs as a sequence of steps; step s uses slot s % 2 and three
// phases 3s+1 (my data is in my slot), 3s+2 (my reduced slice is in my slot), 3s+3 (I am
// done reading everyone's slots for this step). A rank reuses its slot for step s only
// after every peer has passed phase 3(s-2)+3, so consecutive operations need no barrier.
// The collectives' steps do not publish 3s+3 themselves: a rank reads its peers' slots of
// step s before it starts step s+1, so its 3(s+1)+1 says the same one publish later, and
// the next step waits for nothing sooner (a publish is a full fence plus a cache line the
// peers take back: 0.15 us of a 0.55 us barrier at W = 2). Only where a rank must know
// that its peers are done before it returns (CMA: the caller may reuse its buffer) is 3s+3
// published and waited for; the streams' slot channel publishes none either.
// docs/algorithms.md describes each collective's steps and bytes moved.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/fault.hpp"
#include "comm/shm/peer_set.hpp"
#include "comm/shm/segment.hpp"
#include "comm/transport.hpp"
#include "core/algorithm.hpp"
#include "core/error.hpp"
#include "kernels/cpu/half_gemm_model.hpp"

namespace commfuse::comm::shm {

constexpr size_t kControlBytes = 4096;
// All-reduce steps stay within this many bytes so that a step's data is still in cache
// when the peers read it (measured: 1 MiB steps run at 3x the speed of 4 MiB steps here).
inline constexpr size_t kReduceStepBytes = 1024 * 1024;

// What a group found at set-up about reading each other's memory with CMA (comm/shm/cma.hpp,
// comm_create.cpp), alike on every rank.
struct CmaSupport {
  std::string unavailable;  // empty: every rank can read every peer; else why not
  // all_gather, all_to_all and broadcast read the peers' buffers in place (one copy, then a
  // closing synchronization so no rank returns while a peer still reads its buffer) where
  // that saves at least this many bytes of copying per rank; below, the slots (two copies,
  // no closing wait).
  uint64_t min_bytes = 0;
  bool shared_cores = false;  // more ranks than cores: all_gather and broadcast keep the slots
};

// Where ranks share cores a wait lasts until the peer it waits for gets a core, which no
// probe of two ranks predicts, so such a group times its collectives' choices at set-up
// (ShmTransport::measure_shared_cores, shm_crossover.cpp): all_to_all through the slots or
// with CMA at kSharedCoreA2aBytes saved per rank (R-1 blocks), all_reduce one-shot or
// two-shot at kSharedCoreAllReduceBytes per step. One rule for both: the probed size from
// which taking the second algorithm loses least in total, a size's loss being the chosen
// algorithm's time over the better time there (the smaller size on a tie); `never` where
// the first algorithm everywhere loses least. first_us[i] and second_us[i]: the best times
// at sizes[i].
inline constexpr uint64_t kSharedCoreA2aBytes[] = {uint64_t{32} << 10, uint64_t{128} << 10,
                                                   uint64_t{256} << 10, uint64_t{512} << 10};
inline constexpr uint64_t kSharedCoreAllReduceBytes[] = {uint64_t{4} << 10, uint64_t{16} << 10,
                                                         uint64_t{64} << 10, uint64_t{256} << 10};
uint64_t best_crossover_size(const uint64_t* sizes, const double* first_us, const double* second_us,
                             size_t n, uint64_t never);
// all_to_all's crossover to CMA where the slots won at every probed size: the bytes saved
// per rank from which the group's slot copies no longer fit the last-level cache
// (llc_bytes; 0: unknown), within twice the largest probed size and 4 MiB. Each of the
// `world` ranks then touches its source, its destination and its slot, three buffers of
// its whole block set (saved · W / (W - 1) bytes); past that the slots' two copies stream
// from memory where CMA's one does. The probes stop at 512 KiB (each larger one would cost
// every shared-core group's set-up milliseconds). Measured on the AMD EPYC (Zen 4, 32 MiB
// L3, 2 cores), all_to_all through the slots against CMA: W = 4, 4 MiB per rank 1370-1429
// against 850-1049 us (2 MiB: level); W = 8, 2 MiB per rank 1458-1658 against 1082-1153 us
// (512 KiB: slots 150-175 against 232 us).
uint64_t slots_spill_bytes(int world, uint64_t llc_bytes);

// COMMFUSE_ALGO's names for shm's collectives and streams (all_gather, all_to_all, broadcast,
// gather_stream, all_to_all_stream: cma|slots; all_reduce: one_shot|two_shot), checked
// where a communicator is created: InvalidArgument naming an algorithm the op does not
// have, as choosing it would (on every rank, before the group forms, instead of on this
// rank alone inside a call).
void check_shm_algorithms();

// Bytes of one rank's region for a given slot size.
inline size_t region_bytes(size_t slot_bytes) {
  return kControlBytes + 2 * slot_bytes;
}

class ShmTransport final : public Transport {
 public:
  // segments[r] is rank r's region (this rank's own one created by it, the others opened).
  ShmTransport(int rank, std::vector<Segment> segments, std::vector<PeerProcess> processes,
               size_t slot_bytes, int waiting_cores, CmaSupport cma, uint32_t direct_calls_mask);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "shm"; }
  // One host: every rank divides the same world size by the same core count.
  int ranks_per_core() const override { return ranks_per_core_; }
  // Rank 0's bits (comm_create.cpp), 0 where ranks share cores.
  bool direct_calls_pay(DType t, int64_t m) const override {
    return kernels::cpu::direct_calls_pay(direct_calls_mask_, t, m);
  }
  void barrier() override;
  void broadcast(void* buf, uint64_t count, DType dtype, int root) override;
  void all_gather(const void* src, void* dst, uint64_t count, DType dtype) override;
  void reduce_scatter(const void* src, void* dst, uint64_t count, DType dtype) override;
  void all_reduce(const void* src, void* dst, uint64_t count, DType dtype) override;
  void all_to_all(const void* src, void* dst, uint64_t count, DType dtype) override;
  void open_gather_stream(const GatherStream& s, const PieceDriver& drive) override;
  void open_all_to_all_stream(const AllToAllStream& s, const PieceDriver& drive) override;
  void abort(const std::string& reason) override;
  void closing(const std::string& reason) override;
  void reject(const std::string& reason) override;

  // Where ranks share cores: times all_to_all's algorithms (where CMA is available and
  // time_all_to_all) and all_reduce's (time_all_reduce), every rank taking part as in any
  // collective; rank 0's timings decide and are broadcast (see kSharedCoreA2aBytes).
  // comm_create.cpp calls it once, before the group is handed out. The crossover it times
  // on all_to_all serves all_to_all_stream too (the same copies, by the same rule).
  void measure_shared_cores(bool time_all_to_all, bool time_all_reduce);
  bool shared_cores_measured() const { return shared_cores_measured_; }
  // The all_reduce step size from which two-shot is taken where it was timed (0: by the
  // fixed rule; all ones: never).
  uint64_t two_shot_min_bytes() const { return two_shot_min_bytes_; }
  // Bytes of copying per rank that CMA must save (CmaSupport::min_bytes), alike on every rank.
  uint64_t cma_min_bytes() const { return cma_.min_bytes; }
  bool cma_available() const { return cma_.unavailable.empty(); }

 private:
  template <typename Body>
  void run(const CollDesc& desc, Body&& body);
  // Runs body(s, off, n, first) for each step over [0, total) in pieces of at most chunk
  // (one step when total is 0); "done reading" is the next step's 3s+1 (file comment).
  template <typename StepBody>
  void for_each_step(const char* op, uint64_t total, uint64_t chunk, StepBody&& body);
  // Starts step s: waits until every peer is done with the slot this step reuses.
  uint32_t begin_step(const char* op);
  // Publishes phase 3s+1; on an op's first step also checks every rank's descriptor (and
  // publishes, for CMA, where this rank's data starts).
  void arrive(uint32_t s, bool first, const CollDesc& desc, const char* op,
              const void* cma_data = nullptr);
  // The copy algorithm of a call moving `bytes` per peer block: CMA where the group has it
  // and the block reaches its crossover, else the slots; COMMFUSE_ALGO=<op>:cma|slots forces.
  CollAlgo choose_copy(CollOp op, uint64_t bytes);
  // choose_algorithm, its error (a forced algorithm that does not apply) rejecting the call.
  size_t agreed_choice(const char* op, const std::function<std::string()>& what,
                       const std::vector<AlgorithmEntry>& list);
  // all_reduce's algorithm for steps of step_bytes: one-shot up to 4 ranks or 64 KiB steps,
  // else two-shot; COMMFUSE_ALGO=all_reduce:one_shot|two_shot forces.
  CollAlgo choose_all_reduce(uint64_t step_bytes);
  // A CMA call in one step: publishes `mine` (this rank's data, read by the peers), checks
  // the descriptors, runs body() (which reads the peers with read_peer), then waits until
  // every peer is done reading if `read_by_peers`.
  template <typename Body>
  void cma_call(const CollDesc& desc, const char* op, const void* mine, bool read_by_peers,
                Body&& body);
  // The source a call reads while it writes its destination: where the two overlap (an
  // in-place call), a private copy (staged), which the CMA peers read and the slot steps copy
  // piece by piece while blocks land in dst. Before the call's first step: a copy that cannot
  // be allocated refuses the call (refuse).
  const void* staged_source(const char* op, const void* src, size_t src_bytes, const void* dst,
                            size_t dst_bytes, std::unique_ptr<uint8_t[]>& staged);
  // One rank (W = 1): src copied to dst at the call's first piece (fault injection), and
  // true (Transport: the whole result); false where there are peers. Within run(), so that
  // the call is numbered, refused or failed as any other.
  bool alone(const char* op, const void* src, void* dst, size_t bytes);
  // This rank cannot take part in the call it is in, before its first step: that step with a
  // "rejected" descriptor (as reject), then CallFailed; the peers fail the call naming this
  // rank, and the transport stays usable.
  [[noreturn]] void refuse(const char* op, const std::string& why);
  // The first step of a call with this rank's "rejected" descriptor carrying reason.
  void publish_rejection(const char* op, const std::string& reason);
  // Grows scratch_ to at least bytes, before the call's first step: out of memory refuses
  // the call (refuse), where it used to fail the group.
  void grow_scratch(const char* op, size_t bytes);
  // The streams' channels (shm_stream.cpp): through the slots, and gather_stream with CMA
  // (each peer's pieces read from its source with read_peer, into the op's landing place or
  // scratch_: one copy where the slots take two).
  class SlotChannel;
  class CmaGatherChannel;
  class CmaAllToAllChannel;
  // Copies n bytes at offset `off` of the data rank q published into dst.
  void read_peer(int q, uint64_t off, void* dst, uint64_t n, const char* op);
  void check_descriptors(const CollDesc& desc, const char* op);
  // Writes this rank's descriptor of call op_seq_ (before publishing its first phase).
  Control::Desc& write_descriptor(uint32_t op, const CollDesc& desc);
  uint8_t* slot(int r, uint32_t s) const {
    return base_[r] + kControlBytes + (s & 1u) * slot_bytes_;
  }

  int rank_;
  int size_;
  std::vector<Segment> segments_;
  std::vector<uint8_t*> base_;
  PeerSet peers_;
  size_t slot_bytes_;
  int ranks_per_core_ = 1;
  uint32_t direct_calls_mask_ = 0;
  CmaSupport cma_;
  bool algo_forced_ = false;  // COMMFUSE_ALGO names one of this transport's collectives
  // all_to_all's and all_reduce's algorithm while measure_shared_cores times each (empty:
  // choose), and the all_reduce step size from which it chose two-shot (0: not measured,
  // the fixed rule of choose_all_reduce).
  std::optional<CollAlgo> a2a_probe_, all_reduce_probe_;
  uint64_t two_shot_min_bytes_ = 0;
  bool shared_cores_measured_ = false;
  std::vector<uint8_t> scratch_;  // a CMA stream's pieces where the op gives no place
  // read_peer's pieces where the kernel's copy into the destination would be slow (allocated
  // at the first such read; null if that failed: then it reads directly).
  std::unique_ptr<uint8_t[]> bounce_;
  uint32_t step_ = 0;
  uint32_t op_seq_ = 0;
  CallDigestMemo<Control::Desc> digest_;  // write_descriptor's digests
};

// Templates shared by the collectives (shm_transport.cpp) and the streams (shm_stream.cpp).

template <typename Body>
void ShmTransport::run(const CollDesc& desc, Body&& body) {
  const char* op = coll_op_name(desc.op);
  check_usable(op, rank_, failure_);
  // The next call number comes from the call word, not op_seq_: a second thread refused
  // here must not read what the thread in the call writes.
  if (!peers_.begin_call()) {
    check_usable(op, rank_, failure_);  // an abort from another thread, which said why first
    throw_busy(op, rank_);
  }
  ++op_seq_;
  try {
    body(op);
    // Aborted from another thread during the call, where no wait was left to notice: it
    // fails here as on the peers, which see this call's number in the abort.
    if (!peers_.end_call())
      detail::throw_status(Status::kRuntimeError,
                           detail::cat(op, "(rank ", rank_, "): ", failure_.reason()));
  } catch (const CallFailed&) {  // every rank failed it at the first step: still usable
    peers_.end_call();
    throw;
  } catch (const std::exception& e) {  // ours, or one a stream callback let through
    failure_.set(e.what());
    peers_.abort(e.what());
    rethrow_in_call();
  } catch (...) {  // a callback threw something else: the same (the call word says aborted)
    const std::string why =
        detail::cat(op, "(rank ", rank_, "): a callback threw a non-standard exception");
    failure_.set(why);
    peers_.abort(why);
    throw;
  }
}

template <typename Body>
void ShmTransport::cma_call(const CollDesc& desc, const char* op, const void* mine,
                            bool read_by_peers, Body&& body) {
  fault_point(rank_, op, 0);
  const uint32_t s = begin_step(op);
  arrive(s, true, desc, op, mine);
  fault_point(rank_, op, 1);  // the peers may be reading this rank's memory now
  body();
  peers_.publish(3 * s + 3);
  // The caller may reuse its buffer once we return: not while a peer still reads it.
  if (read_by_peers) peers_.wait_all(3 * s + 3, op, PeerSet::Wait::kPeerCopy);
}

template <typename StepBody>
void ShmTransport::for_each_step(const char* op, uint64_t total, uint64_t chunk, StepBody&& body) {
  uint64_t off = 0;
  bool first = true;
  uint64_t piece = 0;
  do {  // at least one step, so an empty op still synchronizes and checks descriptors
    const uint64_t n = std::min(chunk, total - off);
    fault_point(rank_, op, piece++);
    const uint32_t s = begin_step(op);
    body(s, off, n, first);
    off += n;
    first = false;
  } while (off < total);
}

}  // namespace commfuse::comm::shm
