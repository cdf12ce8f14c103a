#include "keep_alive.hpp"

#include <cstring>
#include <exception>
#include <vector>

#include "core/error.hpp"

namespace commfuse::python {
namespace {

// Never freed: the arrays must outlive every transfer MPI may still make, and dropping their
// references at interpreter shutdown could run after Python has finalized.
std::vector<AnyArray>& kept() {
  static auto* arrays = new std::vector<AnyArray>();
  return *arrays;
}

}  // namespace

KeepIfFailedOverMpi::KeepIfFailedOverMpi(const Comm* comm,
                                         std::initializer_list<const TensorRef*> arrays)
    : comm_(comm),
      was_usable_(comm != nullptr && comm->usable()),
      uncaught_(std::uncaught_exceptions()) {
  CF_ASSERT(arrays.size() <= arrays_.size());
  for (const TensorRef* t : arrays)
    if (t != nullptr) arrays_[count_++] = t;
}

KeepIfFailedOverMpi::~KeepIfFailedOverMpi() {
  if (comm_ == nullptr || std::uncaught_exceptions() <= uncaught_) return;  // it returned
  // Only the call that made it unusable: a rejected argument leaves it usable (its transfers,
  // if any, completed), and a call on a communicator already unusable fails before it posts
  // anything (keeping its arrays too would grow without bound in a retry loop).
  if (!was_usable_ || std::strcmp(comm_->transport_name(), "mpi") != 0 || comm_->usable()) return;
  try {
    for (size_t i = 0; i < count_; ++i) kept().push_back(arrays_[i]->array);
  } catch (...) {  // out of memory while unwinding: the caller's exception is the one to see
  }
}

size_t arrays_kept_after_failures() {
  return kept().size();
}

}  // namespace commfuse::python
