// Communicators and collectives: `_commfuse.Comm` owns a commfuse::Comm. destroy() frees it
// early (later calls raise InvalidArgument; a call in another thread keeps it until it
// returns: comm_hold.hpp); otherwise it lives as long as the Python object.
//
// Buffer sizes are checked here, against the arrays' real sizes, before any communication;
// a mismatch rejects through the communicator (the peers in the call fail it naming this
// rank; the communicator stays usable) like every argument error.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "api/held_comms.hpp"
#include "bindings.hpp"
#include "comm/comm_impl.hpp"
#include "comm_hold.hpp"
#include "core/error.hpp"
#include "interrupt.hpp"
#include "keep_alive.hpp"
#include "tensor_ref.hpp"

namespace nb = nanobind;

namespace commfuse::python {
namespace {

class PyComm {
 public:
  PyComm(int rank, int world_size, const std::string& init_method) {
    {
      Released release;  // waits for the peers
      comm_ = std::make_shared<Comm>(rank, world_size, init_method);
    }
    api::register_held_comm(comm_);  // operators by group name hold it (comm_hold.hpp)
  }

  // The communicator, held for one call: a destroy() meanwhile (another thread) frees it
  // when that call drops it.
  HeldComm get(const char* what) const {
    std::lock_guard<std::mutex> lock(mutex_);
    CF_CHECK_ARG(comm_ != nullptr, what, ": the communicator was destroyed");
    return HeldComm(comm_);
  }
  bool alive() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return comm_ != nullptr;
  }
  void destroy() {
    std::shared_ptr<Comm> last;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (comm_ == nullptr) return;
      api::forget_held_comm(comm_->name());
      last = std::move(comm_);
    }
    Released release;
    last.reset();  // frees it unless a call in another thread still holds it
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<Comm> comm_;
};

// "all_gather(rank 1): " + message, rejected through the communicator (CommImpl::reject).
// Called with the GIL, which telling the peers (a wait for them, bounded) gives up, so that
// the rank's other Python threads (a watchdog's abort()) run meanwhile.
template <typename... Args>
[[noreturn]] void reject(Comm& c, const char* op, Args&&... args) {
  const std::string message =
      detail::cat(op, "(rank ", c.rank(), "): ", std::forward<Args>(args)...);
  Released release;
  c.impl().reject(Status::kParamInvalid, message);
}

bool overlap(const TensorRef& a, const TensorRef& b) {
  const auto* pa = static_cast<const char*>(a.view.data);
  const auto* pb = static_cast<const char*>(b.view.data);
  return pa < pb + b.storage_bytes() && pb < pa + a.storage_bytes();
}

// The rules every collective shares: dense buffers, one dtype, dst writable, src and dst
// disjoint (all_reduce: equal is allowed too), and the element counts the collective needs.
// Messages name the Python arguments: src is `x`, dst is `out`.
// The collectives move host memory only (the CUDA backend runs the operators).
void check_host(Comm& c, const char* op, const char* name, const TensorRef& t) {
  if (t.view.device != Device{})
    reject(c, op, name, " is on ", device_name(t.view.device),
           ": not supported (the collectives take host memory)");
}

void check_pair(Comm& c, const char* op, const TensorRef& src, const TensorRef& dst,
                int64_t src_count, int64_t dst_count, bool same_allowed) {
  check_host(c, op, "x", src);
  check_host(c, op, "out", dst);
  if (!src.contiguous()) reject(c, op, "x must be row-major contiguous");
  if (!dst.contiguous()) reject(c, op, "out must be row-major contiguous");
  if (dst.read_only) reject(c, op, "out is read-only");
  if (src.view.dtype != dst.view.dtype)
    reject(c, op, "out dtype is ", dtype_name(dst.view.dtype), " but x dtype is ",
           dtype_name(src.view.dtype));
  if (src.view.numel() != src_count || dst.view.numel() != dst_count)
    reject(c, op, "x has ", src.view.numel(), " and out ", dst.view.numel(), " elements but need ",
           src_count, " and ", dst_count);
  const bool same = src.view.data == dst.view.data;
  if (overlap(src, dst) && !(same && same_allowed))
    reject(c, op, "x and out overlap", same_allowed ? " (only out=x is allowed)" : "");
}

// src's (x's) element count must split into world_size blocks.
int64_t block_count(Comm& c, const char* op, const TensorRef& src) {
  const int64_t n = src.view.numel();
  if (n % c.world_size() != 0)
    reject(c, op, "x has ", n, " elements, not a multiple of the world size ", c.world_size());
  return n / c.world_size();
}

}  // namespace

void bind_comm(nb::module_& m) {
  nb::class_<PyComm>(m, "Comm", "A live commfuse::Comm (use commfuse.init instead).")
      .def(nb::init<int, int, const std::string&>(), nb::arg("rank"), nb::arg("world_size"),
           nb::arg("init_method"),
           "Create the communicator (collective: every rank calls it). rank/world_size -1: "
           "from the environment (env://) or MPI (mpi).")
      .def_prop_ro(
          "rank", [](const PyComm& p) { return p.get("rank")->rank(); }, "This rank.")
      .def_prop_ro(
          "world_size", [](const PyComm& p) { return p.get("world_size")->world_size(); },
          "Number of ranks.")
      .def_prop_ro(
          "name", [](const PyComm& p) { return p.get("name")->name(); },
          "The group / hcom string operators take.")
      .def_prop_ro(
          "transport",
          [](const PyComm& p) { return std::string(p.get("transport")->transport_name()); },
          "'shm' or 'mpi'.")
      .def_prop_ro("alive", &PyComm::alive, "False once destroyed.")
      .def_prop_ro(
          "usable", [](const PyComm& p) { return p.get("usable")->usable(); },
          "False after a transport failure (see failure) or abort().")
      .def_prop_ro(
          "failure", [](const PyComm& p) { return p.get("failure")->failure(); },
          "Why it is unusable ('' while usable).")
      .def(
          "abort",
          [](PyComm& p, const std::string& reason) {
            const HeldComm held = p.get("abort");
            Comm& c = *held;
            Released release;  // MPI: waits (bounded) to tell the peers
            c.abort(reason);
          },
          nb::arg("reason") = "",
          "Make the communicator unusable and tell the peers (ncclCommAbort); any thread, also "
          "while a call is in flight (it then fails with reason).")
      .def("destroy", &PyComm::destroy, "Free the communicator now (idempotent).")
      .def(
          "barrier",
          [](PyComm& p) {
            const HeldComm held = p.get("barrier");
            Comm& c = *held;
            Released release;
            c.barrier();
          },
          "Wait until every rank has called barrier().")
      .def(
          "broadcast",
          [](PyComm& p, const TensorRef& buf, int root) {
            const HeldComm held = p.get("broadcast");
            Comm& c = *held;
            check_host(c, "broadcast", "x", buf);
            if (!buf.contiguous()) reject(c, "broadcast", "x must be row-major contiguous");
            if (buf.read_only) reject(c, "broadcast", "x is read-only");
            const auto count = static_cast<size_t>(buf.view.numel());
            const KeepIfFailedOverMpi keep(&c, {&buf});
            Released release;
            c.broadcast(buf.view.data, count, buf.view.dtype, root);
          },
          nb::arg("buf"), nb::arg("root"), "buf (every rank) = buf of rank root, in place.")
      .def(
          "all_gather",
          [](PyComm& p, const TensorRef& src, const TensorRef& dst) {
            const HeldComm held = p.get("all_gather");
            Comm& c = *held;
            const int64_t n = src.view.numel();
            check_pair(c, "all_gather", src, dst, n, n * c.world_size(), false);
            const KeepIfFailedOverMpi keep(&c, {&src, &dst});
            Released release;
            c.all_gather(src.view.data, dst.view.data, static_cast<size_t>(n), src.view.dtype);
          },
          nb::arg("src"), nb::arg("dst"), "dst (R·n elements) = rank-order concat of every src.")
      .def(
          "all_reduce",
          [](PyComm& p, const TensorRef& src, const TensorRef& dst) {
            const HeldComm held = p.get("all_reduce");
            Comm& c = *held;
            const int64_t n = src.view.numel();
            check_pair(c, "all_reduce", src, dst, n, n, true);
            const KeepIfFailedOverMpi keep(&c, {&src, &dst});
            Released release;
            c.all_reduce(src.view.data, dst.view.data, static_cast<size_t>(n), src.view.dtype);
          },
          nb::arg("src"), nb::arg("dst"), "dst = rank-order sum of every src (src may be dst).")
      .def(
          "reduce_scatter",
          [](PyComm& p, const TensorRef& src, const TensorRef& dst) {
            const HeldComm held = p.get("reduce_scatter");
            Comm& c = *held;
            const int64_t n = block_count(c, "reduce_scatter", src);
            check_pair(c, "reduce_scatter", src, dst, n * c.world_size(), n, false);
            const KeepIfFailedOverMpi keep(&c, {&src, &dst});
            Released release;
            c.reduce_scatter(src.view.data, dst.view.data, static_cast<size_t>(n), src.view.dtype);
          },
          nb::arg("src"), nb::arg("dst"),
          "dst (n elements) on rank r = rank-order sum of block r (of R) of every src.")
      .def(
          "all_to_all",
          [](PyComm& p, const TensorRef& src, const TensorRef& dst) {
            const HeldComm held = p.get("all_to_all");
            Comm& c = *held;
            const int64_t n = block_count(c, "all_to_all", src);
            check_pair(c, "all_to_all", src, dst, n * c.world_size(), n * c.world_size(), false);
            const KeepIfFailedOverMpi keep(&c, {&src, &dst});
            Released release;
            c.all_to_all(src.view.data, dst.view.data, static_cast<size_t>(n), src.view.dtype);
          },
          nb::arg("src"), nb::arg("dst"),
          "Block s of src goes to rank s; block s of dst came from rank s.");
}

}  // namespace commfuse::python
