#include "comm/shm/shm_transport.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <span>

#include "comm/shm/cma.hpp"
#include "core/algorithm.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/small_vector.hpp"
#include "kernels/cpu/copy.hpp"
#include "kernels/cpu/reduce.hpp"

namespace commfuse::comm::shm {
namespace {

// Below this many bytes per step an all-reduce is one-shot (every rank sums every rank's
// data: one synchronization); above it two-shot (reduce-scatter + all-gather: each rank
// reads only 1/R of the data per phase).
constexpr size_t kOneShotBytes = 64 * 1024;

// The names of choose_copy's and choose_all_reduce's algorithm lists, in list order.
constexpr const char* kCopyAlgorithms[] = {"cma", "slots"};
constexpr const char* kAllReduceAlgorithms[] = {"one_shot", "two_shot"};

size_t elem_bytes(DType t) {
  return static_cast<size_t>(dtype_bits(t) / 8);
}

// Not glibc's memcpy: see kernels/cpu/copy.hpp (accepts the null pointers of empty buffers).
void copy_bytes(void* dst, const void* src, size_t n) {
  kernels::cpu::copy(dst, src, n);
}

// Slice q of n elements split as evenly as possible over r parts.
void slice(uint64_t n, int parts, int q, uint64_t* off, uint64_t* len) {
  const uint64_t base = n / static_cast<uint64_t>(parts);
  const uint64_t rem = n % static_cast<uint64_t>(parts);
  const auto uq = static_cast<uint64_t>(q);
  *off = uq * base + std::min(uq, rem);
  *len = base + (uq < rem ? 1 : 0);
}

}  // namespace

const void* ShmTransport::staged_source(const char* op, const void* src, size_t src_bytes,
                                        const void* dst, size_t dst_bytes,
                                        std::unique_ptr<uint8_t[]>& staged) {
  const void* from = src;
  // Refused before the first step: the call fails, not the group.
  if (!copy_if_overlapping(&from, src_bytes, dst, dst_bytes, staged))
    refuse(op, detail::cat("out of memory allocating ", src_bytes,
                           " bytes to stage the source of an in-place call (its peers read it "
                           "while this rank writes the destination)"));
  return from;
}

bool ShmTransport::alone(const char* op, const void* src, void* dst, size_t bytes) {
  if (size_ != 1) return false;
  fault_point(rank_, op, 0);
  copy_bytes(dst, src, bytes);
  return true;
}

void ShmTransport::grow_scratch(const char* op, size_t bytes) {
  if (scratch_.size() >= bytes) return;
  try {
    scratch_.resize(bytes);
  } catch (const std::bad_alloc&) {
    refuse(op, detail::cat("out of memory allocating ", bytes,
                           " bytes of scratch for the stream's pieces"));
  }
}

void ShmTransport::publish_rejection(const char* op, const std::string& reason) {
  // The first step of the call the peers are making: its slot is free once they are done
  // with step s-2 (as for any call); this rank's descriptor says "rejected" and nothing is
  // read or written after it. Every rank leaves the call at phase 3s+1, so the phases stay
  // in step for the next call (later steps wait for "at least" a phase).
  const uint32_t s = begin_step(op);
  Control::Desc& d = write_descriptor(kRejectedOp, CollDesc{});
  detail::copy_message(d.reason, sizeof d.reason, reason);
  peers_.publish(3 * s + 1);
}

void ShmTransport::refuse(const char* op, const std::string& why) {
  const std::string msg = detail::cat(op, "(rank ", rank_, "): ", why);
  publish_rejection(op, msg);  // a dead or stalled peer throws here: run() then aborts
  throw CallFailed(msg);
}

ShmTransport::ShmTransport(int rank, std::vector<Segment> segments,
                           std::vector<PeerProcess> processes, size_t slot_bytes, int waiting_cores,
                           CmaSupport cma, uint32_t direct_calls_mask)
    : rank_(rank),
      size_(static_cast<int>(segments.size())),
      segments_(std::move(segments)),
      peers_(
          rank,
          [&] {
            std::vector<Control*> c;
            for (auto& s : segments_) c.push_back(static_cast<Control*>(s.data()));
            return c;
          }(),
          std::move(processes), size_ > waiting_cores),
      slot_bytes_(slot_bytes),
      // waiting_cores is the group's (comm_create: the cores its ranks wait on, from the union
      // of their CPU sets and their calling threads'), alike on every rank.
      ranks_per_core_((size_ + std::max(1, waiting_cores) - 1) / std::max(1, waiting_cores)),
      direct_calls_mask_(direct_calls_mask),
      cma_(std::move(cma)),
      // Read once: the plain path of every call then costs one comparison.
      algo_forced_(
          !forced_algorithm("all_gather").empty() || !forced_algorithm("all_to_all").empty() ||
          !forced_algorithm("broadcast").empty() || !forced_algorithm("all_reduce").empty() ||
          !forced_algorithm("gather_stream").empty() ||
          !forced_algorithm("all_to_all_stream").empty()) {
  for (auto& s : segments_) base_.push_back(static_cast<uint8_t*>(s.data()));
}

uint32_t ShmTransport::begin_step(const char* op) {
  const uint32_t s = step_++;
  peers_.wait_all(3 * s - 3, op);  // everyone is done with step s-2, which used this slot
  return s;
}

Control::Desc& ShmTransport::write_descriptor(uint32_t op, const CollDesc& desc) {
  auto& d = peers_.mine().desc[op_seq_ & 1u];
  fill_wire(d, op, desc, op_seq_);
  d.cma_address = 0;
  peers_.mine().digest[op_seq_ & 1u].store(digest_(d), std::memory_order_relaxed);
  return d;
}

void ShmTransport::arrive(uint32_t s, bool first, const CollDesc& desc, const char* op,
                          const void* cma_data) {
  if (first)
    write_descriptor(static_cast<uint32_t>(desc.op), desc).cma_address =
        reinterpret_cast<uint64_t>(cma_data);
  peers_.publish(3 * s + 1);
  if (first) {
    peers_.wait_all(3 * s + 1, op);
    check_descriptors(desc, op);
  }
}

void check_shm_algorithms() {
  const auto check = [](const char* op, std::span<const char* const> names) {
    const std::string forced = forced_algorithm(op);
    if (forced.empty()) return;
    std::string list;
    for (const char* n : names) {
      if (forced == n) return;
      list += detail::cat(list.empty() ? "" : "|", n);
    }
    detail::throw_status(
        Status::kParamInvalid,
        detail::cat("COMMFUSE_ALGO: ", op, " has no algorithm '", forced, "' (", list, ")"));
  };
  for (const char* op :
       {"all_gather", "all_to_all", "broadcast", "gather_stream", "all_to_all_stream"})
    check(op, kCopyAlgorithms);
  check("all_reduce", kAllReduceAlgorithms);
}

size_t ShmTransport::agreed_choice(const char* op, const std::function<std::string()>& what,
                                   const std::vector<AlgorithmEntry>& list) {
  try {
    return choose_algorithm(op, what, list);
  } catch (const Error& e) {
    // COMMFUSE_ALGO forcing what does not apply here, or changed since the communicator
    // checked it: this rank's rejection of the call, told to the peers (alone it had left
    // them to pair this call with its next one).
    reject(e.what());
    throw;
  }
}

CollAlgo ShmTransport::choose_copy(CollOp op, uint64_t bytes) {
  // One rank copies once (alone()): no algorithm runs, so none is chosen, forced or printed.
  if (size_ == 1) return CollAlgo::kDefault;
  if (a2a_probe_ && op == CollOp::kAllToAll) return *a2a_probe_;  // shm_crossover.cpp
  const bool cma = cma_.unavailable.empty();
  // CMA saves one copy of each block a peer reads through this rank's slot: all_to_all's
  // R-1 blocks, the one block of all_gather, broadcast and gather_stream (whose ops copy
  // what arrives to gather_out too: CMA reads it there). The latter stay on the slots
  // where ranks share cores (measured at W=4 on 2 cores: the slots' pipelined steps beat
  // CMA's closing wait at every size to 64 MiB, docs/algorithms.md).
  const bool one_block = op != CollOp::kAllToAll && op != CollOp::kAllToAllStream;
  const uint64_t saved = one_block ? bytes : bytes * static_cast<uint64_t>(size_ - 1);
  const bool worth = saved >= cma_.min_bytes && !(one_block && cma_.shared_cores);
  if (!algo_forced_ && log::verbose_level() < 1)
    return cma && worth ? CollAlgo::kCma : CollAlgo::kDefault;
  const char* name = coll_op_name(op);
  const std::vector<AlgorithmEntry> list{
      {kCopyAlgorithms[0], cma ? "" : "CMA unavailable: " + cma_.unavailable,
       worth ? ""
       : saved < cma_.min_bytes
           ? detail::cat(saved, " bytes saved, below the CMA crossover ", cma_.min_bytes)
           : std::string("ranks share cores: the slots' pipelined steps are faster")},
      {kCopyAlgorithms[1], ""}};
  const size_t i = agreed_choice(
      name, [&] { return detail::cat(name, "(rank ", rank_, ") ", bytes, " bytes per block"); },
      list);
  return i == 0 ? CollAlgo::kCma : CollAlgo::kDefault;
}

CollAlgo ShmTransport::choose_all_reduce(uint64_t step_bytes) {
  // With a core per rank, up to 4 ranks one-shot always: with 2 ranks each reads the
  // other's data once either way and one-shot saves a synchronization. Larger groups use
  // two-shot past 64 KiB per step. (Tests shrink the slot: the threshold shrinks with it,
  // and they force each algorithm too.) Ranks sharing cores time it (shm_crossover.cpp).
  if (size_ == 1) return CollAlgo::kOneShot;         // copies once (alone()), as in choose_copy
  if (all_reduce_probe_) return *all_reduce_probe_;  // shm_crossover.cpp
  const uint64_t limit = std::min(kOneShotBytes, slot_bytes_ / 4);
  // Ranks sharing cores: from the step size the group's set-up timings chose (two-shot
  // reads 1/R of the data per phase, and the ranks' total work is what 2 cores wait on).
  const bool two_shot =
      two_shot_min_bytes_ > 0 ? step_bytes >= two_shot_min_bytes_ : size_ > 4 && step_bytes > limit;
  if (!algo_forced_ && log::verbose_level() < 1)
    return two_shot ? CollAlgo::kTwoShot : CollAlgo::kOneShot;
  const std::vector<AlgorithmEntry> list{
      {kAllReduceAlgorithms[0], "",
       two_shot ? detail::cat(size_, " ranks, ", step_bytes,
                              "-byte steps: two-shot reads 1/R of the data per phase")
                : ""},
      {kAllReduceAlgorithms[1], "",
       two_shot ? ""
       : two_shot_min_bytes_ > 0
           ? (two_shot_min_bytes_ == ~uint64_t{0}
                  ? std::string("this group's set-up timings chose one-shot at every step size")
                  : detail::cat(step_bytes, "-byte steps: below the ", two_shot_min_bytes_,
                                "-byte crossover this group's set-up timings chose"))
       : size_ <= 4 ? detail::cat(size_, " ranks: one synchronization per step beats two")
                    : detail::cat(step_bytes, "-byte steps (at most ", limit,
                                  "): one synchronization per step beats two")}};
  const size_t i = agreed_choice(
      "all_reduce",
      [&] { return detail::cat("all_reduce(rank ", rank_, ") ", step_bytes, "-byte steps"); },
      list);
  return i == 0 ? CollAlgo::kOneShot : CollAlgo::kTwoShot;
}

namespace {
constexpr size_t kBounceBytes = size_t{256} << 10;  // in cache: read, then copied out at once
// Reads below a page copy at most one page's worth per page of the source: the buffer's
// second copy would cost about what the slow string move does.
constexpr uint64_t kBounceMinBytes = 4096;
}  // namespace

void ShmTransport::read_peer(int q, uint64_t off, void* dst, uint64_t n, const char* op) {
  const uint64_t address = peers_.of(q).desc[op_seq_ & 1u].cma_address + off;
  const pid_t pid = peers_.pid(q);
  // Where the kernel's copy straight into dst is slow at this distance of dst past the
  // source (cma_slow_distances; AMD EPYC Zen 4 VM, 1-15 bytes modulo 4 KiB: 2.9 GB/s instead
  // of 13), the pieces land in a buffer at the source's own page offset and `copy` moves
  // them on with its vector loop (W = 2 bfloat16 all_gather of 512 KiB + 8 bytes per block:
  // 212-221 -> 70-74 us).
  if (n >= kBounceMinBytes &&
      cma_slow_distances().slow(dst,
                                reinterpret_cast<const void*>(static_cast<uintptr_t>(address)))) {
    if (!bounce_) bounce_.reset(new (std::nothrow) uint8_t[kBounceBytes + 2 * 4096]);
    if (bounce_) {
      auto* base = bounce_.get();
      base += (4096 - reinterpret_cast<uintptr_t>(base) % 4096) % 4096 + address % 4096;
      auto* out = static_cast<uint8_t*>(dst);
      for (uint64_t done = 0; done < n; done += kBounceBytes) {
        const size_t piece = static_cast<size_t>(std::min<uint64_t>(kBounceBytes, n - done));
        if (!cma_read(pid, base, address + done, piece)) peers_.fail_reading(q, errno, op);
        kernels::cpu::copy(out + done, base, piece);
      }
      return;
    }
  }
  if (n != 0 && !cma_read(pid, dst, address, n)) peers_.fail_reading(q, errno, op);
}

void ShmTransport::check_descriptors(const CollDesc& desc, const char* op) {
  // Every peer's phase 3s+1 was acquired (wait_all), so its digest is the one it published.
  const uint32_t parity = op_seq_ & 1u;
  const uint64_t mine = peers_.mine().digest[parity].load(std::memory_order_relaxed);
  bool same = true;
  for (int r = 0; r < size_ && same; ++r)
    same = peers_.of(r).digest[parity].load(std::memory_order_relaxed) == mine;
  if (same) return;
  check_call(op, rank_, size_, desc,
             [&](int r) -> const Control::Desc& { return peers_.of(r).desc[op_seq_ & 1u]; });
}

void ShmTransport::abort(const std::string& reason) {
  failure_.set(reason);
  peers_.abort(reason);  // the call in flight, if any; else from the next one on
}

void ShmTransport::closing(const std::string& reason) {
  // No call in flight (CommImpl waited them out): PeerSet::abort records the next call, so
  // peers still finishing this rank's last call are not failed; one that waits for this
  // rank in a later call fails at once. A failed transport has told the peers already.
  if (failure_.failed()) return;
  try {
    peers_.abort(reason);
  } catch (...) {  // closing never throws (a destructor's)
  }
}

void ShmTransport::reject(const std::string& reason) {
  if (failure_.failed()) return;  // unusable: the peers have been told already
  // An abort from another thread closed it, or another thread is in a call (its own error).
  if (!peers_.begin_call()) return;
  ++op_seq_;
  try {
    publish_rejection("reject", reason);
    peers_.end_call();  // an abort meanwhile: the peers fail this call anyway (rejected)
  } catch (const std::exception& e) {  // a dead or stalled peer: begin_step aborted already
    failure_.set(e.what());
  }
}

void ShmTransport::barrier() {
  CollDesc desc{CollOp::kBarrier, DType::kInt8, 0, -1};
  run(desc, [&](const char* op) {
    fault_point(rank_, op, 0);
    const uint32_t s = begin_step(op);
    arrive(s, true, desc, op);
  });
}

void ShmTransport::broadcast(void* buf, uint64_t count, DType dtype, int root) {
  CollDesc desc{CollOp::kBroadcast, dtype, count, root};
  const size_t total = dtype_storage_bytes(dtype, count);
  desc.algo = choose_copy(desc.op, total);
  run(desc, [&](const char* op) {
    auto* p = static_cast<uint8_t*>(buf);
    if (desc.algo == CollAlgo::kCma) {
      cma_call(desc, op, buf, rank_ == root, [&] {
        if (rank_ == root) return;
        read_peer(root, 0, p, total, op);
        // The root waits for this read (cma_call), but this rank waits for nothing after
        // it: a root that failed meanwhile (an abort ended its wait) may have refilled buf.
        peers_.check_read_intact(root, op);
      });
      return;
    }
    for_each_step(op, total, slot_bytes_, [&](uint32_t s, uint64_t off, uint64_t n, bool first) {
      if (rank_ == root) copy_bytes(slot(rank_, s), p + off, n);
      arrive(s, first, desc, op);
      if (rank_ != root) {
        peers_.wait(root, 3 * s + 1, op);
        copy_bytes(p + off, slot(root, s), n);
      }
    });
  });
}

void ShmTransport::all_gather(const void* src, void* dst, uint64_t count, DType dtype) {
  CollDesc desc{CollOp::kAllGather, dtype, count, -1};
  const size_t per_rank = dtype_storage_bytes(dtype, count);
  desc.algo = choose_copy(desc.op, per_rank);
  run(desc, [&](const char* op) {
    if (alone(op, src, dst, per_rank)) return;
    auto* out = static_cast<uint8_t*>(dst);
    // In place (src is this rank's block of dst) needs no copy: no rank writes that block.
    // A source elsewhere in dst is staged, on both paths: the slot steps read it piece by
    // piece while the peers' blocks land over it.
    std::unique_ptr<uint8_t[]> staged;
    const auto* in = static_cast<const uint8_t*>(
        src == out + rank_ * per_rank
            ? src
            : staged_source(op, src, per_rank, dst, size_ * per_rank, staged));
    if (desc.algo == CollAlgo::kCma) {
      cma_call(desc, op, in, true, [&] {
        copy_bytes(out + rank_ * per_rank, in, per_rank);
        for (int i = 1; i < size_; ++i) {
          const int q = (rank_ + i) % size_;
          read_peer(q, 0, out + q * per_rank, per_rank, op);
        }
      });
      return;
    }
    for_each_step(op, per_rank, slot_bytes_, [&](uint32_t s, uint64_t off, uint64_t n, bool first) {
      copy_bytes(slot(rank_, s), in + off, n);
      arrive(s, first, desc, op);
      copy_bytes(out + rank_ * per_rank + off, in + off, n);
      for (int i = 1; i < size_; ++i) {
        const int q = (rank_ + i) % size_;  // rotate so ranks don't all read rank 0 first
        peers_.wait(q, 3 * s + 1, op);
        copy_bytes(out + q * per_rank + off, slot(q, s), n);
      }
    });
  });
}

void ShmTransport::all_to_all(const void* src, void* dst, uint64_t count, DType dtype) {
  CollDesc desc{CollOp::kAllToAll, dtype, count, -1};
  const size_t per_peer = dtype_storage_bytes(dtype, count);
  desc.algo = choose_copy(desc.op, per_peer);
  run(desc, [&](const char* op) {
    if (alone(op, src, dst, per_peer)) return;
    std::unique_ptr<uint8_t[]> staged;
    if (desc.algo == CollAlgo::kCma) {
      auto* out = static_cast<uint8_t*>(dst);
      const auto* mine = static_cast<const uint8_t*>(
          staged_source(op, src, size_ * per_peer, dst, size_ * per_peer, staged));
      cma_call(desc, op, mine, true, [&] {
        copy_bytes(out + rank_ * per_peer, mine + rank_ * per_peer, per_peer);
        for (int i = 1; i < size_; ++i) {
          const int q = (rank_ + i) % size_;
          read_peer(q, rank_ * per_peer, out + q * per_peer, per_peer, op);
        }
      });
      return;
    }
    const size_t chunk = std::max<size_t>(64, (slot_bytes_ / size_) & ~size_t{63});
    // In place (src == dst) needs no copy: each step writes back only the chunks it has just
    // read. Any other overlap is staged: a step's blocks would land on chunks still unread.
    const auto* in = static_cast<const uint8_t*>(
        src == dst ? src : staged_source(op, src, size_ * per_peer, dst, size_ * per_peer, staged));
    auto* out = static_cast<uint8_t*>(dst);
    for_each_step(op, per_peer, chunk, [&](uint32_t s, uint64_t off, uint64_t n, bool first) {
      uint8_t* mine = slot(rank_, s);
      for (int q = 0; q < size_; ++q)
        if (q != rank_) copy_bytes(mine + q * chunk, in + q * per_peer + off, n);
      arrive(s, first, desc, op);
      copy_bytes(out + rank_ * per_peer + off, in + rank_ * per_peer + off, n);
      for (int i = 1; i < size_; ++i) {
        const int q = (rank_ + i) % size_;
        peers_.wait(q, 3 * s + 1, op);
        copy_bytes(out + q * per_peer + off, slot(q, s) + rank_ * chunk, n);
      }
    });
  });
}

void ShmTransport::reduce_scatter(const void* src, void* dst, uint64_t count, DType dtype) {
  CollDesc desc{CollOp::kReduceScatter, dtype, count, -1};
  check_reducible("reduce_scatter", rank_, dtype);
  run(desc, [&](const char* op) {
    const size_t es = elem_bytes(dtype);
    if (alone(op, src, dst, count * es)) return;
    const uint64_t chunk = std::max<uint64_t>(1, slot_bytes_ / size_ / es);
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    SmallVector<const void*, 16> parts(static_cast<size_t>(size_));
    for_each_step(op, count, chunk, [&](uint32_t s, uint64_t off, uint64_t n, bool first) {
      uint8_t* mine = slot(rank_, s);
      for (int q = 0; q < size_; ++q)
        copy_bytes(mine + q * chunk * es, in + (q * count + off) * es, n * es);
      arrive(s, first, desc, op);
      for (int i = 1; i < size_; ++i) peers_.wait((rank_ + i) % size_, 3 * s + 1, op);
      for (int p = 0; p < size_; ++p) parts[p] = slot(p, s) + rank_ * chunk * es;
      kernels::cpu::reduce_sum(parts.data(), size_, out + off * es, n, dtype);
    });
  });
}

void ShmTransport::all_reduce(const void* src, void* dst, uint64_t count, DType dtype) {
  CollDesc desc{CollOp::kAllReduce, dtype, count, -1};
  check_reducible("all_reduce", rank_, dtype);
  const size_t es = elem_bytes(dtype);
  const uint64_t chunk = std::min(slot_bytes_, kReduceStepBytes) / es;
  desc.algo = choose_all_reduce(std::min(count, chunk) * es);
  run(desc, [&](const char* op) {
    if (alone(op, src, dst, count * es)) return;
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    SmallVector<const void*, 16> parts(static_cast<size_t>(size_));
    for_each_step(op, count, chunk, [&](uint32_t s, uint64_t off, uint64_t n, bool first) {
      const bool one_shot = desc.algo == CollAlgo::kOneShot;
      uint64_t my_off = 0, my_len = 0;
      slice(n, size_, rank_, &my_off, &my_len);
      if (one_shot) {
        copy_bytes(slot(rank_, s), in + off * es, n * es);
      } else {
        // Peers read only their own slice of my slot: my slice stays out of it.
        copy_bytes(slot(rank_, s), in + off * es, my_off * es);
        copy_bytes(slot(rank_, s) + (my_off + my_len) * es, in + (off + my_off + my_len) * es,
                   (n - my_off - my_len) * es);
      }
      arrive(s, first, desc, op);
      for (int i = 1; i < size_; ++i) peers_.wait((rank_ + i) % size_, 3 * s + 1, op);
      if (one_shot) {
        for (int p = 0; p < size_; ++p) parts[p] = p == rank_ ? in + off * es : slot(p, s);
        kernels::cpu::reduce_sum(parts.data(), size_, out + off * es, n, dtype);
      } else {
        for (int p = 0; p < size_; ++p)
          parts[p] = (p == rank_ ? in + off * es : slot(p, s)) + my_off * es;
        // The sum goes to the unused slice of my slot, where the peers copy it from.
        uint8_t* result = slot(rank_, s) + my_off * es;
        kernels::cpu::reduce_sum(parts.data(), size_, result, my_len, dtype);
        peers_.publish(3 * s + 2);
        copy_bytes(out + (off + my_off) * es, result, my_len * es);
        for (int i = 1; i < size_; ++i) {
          const int q = (rank_ + i) % size_;
          uint64_t q_off = 0, q_len = 0;
          slice(n, size_, q, &q_off, &q_len);
          peers_.wait(q, 3 * s + 2, op);
          copy_bytes(out + (off + q_off) * es, slot(q, s) + q_off * es, q_len * es);
        }
      }
    });
  });
}

}  // namespace commfuse::comm::shm
