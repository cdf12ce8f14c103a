// After a call over MPI fails (a timeout, Ctrl-C, an abort), MPI may still complete a
// transfer into the call's arrays if a late peer resumes: a receive it has matched cannot be
// cancelled, and a queued send still reads its input (docs/reliability.md, "A failed call's
// buffers over MPI"). Freeing such an array would let MPI write into whatever Python puts
// there next, so the bindings keep the arrays of a call that failed over MPI, leaving the
// communicator unusable, until the process exits.
#pragma once

#include <commfuse/commfuse.hpp>

#include <array>
#include <cstddef>
#include <initializer_list>

#include "tensor_ref.hpp"

namespace commfuse::python {

// Declare before the call's Released: it is then destroyed after it, with the GIL held.
// Null arrays are skipped; so is a null comm (a group not made from Python). Keeps the
// arrays only of the call that found the communicator usable and left it unusable.
class KeepIfFailedOverMpi {
 public:
  KeepIfFailedOverMpi(const Comm* comm, std::initializer_list<const TensorRef*> arrays);
  ~KeepIfFailedOverMpi();
  KeepIfFailedOverMpi(const KeepIfFailedOverMpi&) = delete;
  KeepIfFailedOverMpi& operator=(const KeepIfFailedOverMpi&) = delete;

 private:
  const Comm* comm_;
  bool was_usable_;
  std::array<const TensorRef*, 12> arrays_{};
  size_t count_ = 0;
  int uncaught_;  // std::uncaught_exceptions() at construction: more at destruction = it threw
};

// How many arrays are being kept (for the tests).
size_t arrays_kept_after_failures();

}  // namespace commfuse::python
