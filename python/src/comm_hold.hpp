// Communicators made from Python, by name, so that each call holds the one it uses: a
// destroy() in another Python thread then frees it once that call returns, instead of under
// it (which crashed). Calls by group name (the operators) hold it through hold_group.
#pragma once

#include <commfuse/commfuse.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace commfuse::python {

// A communicator held for one call. Dropping the last hold (a destroy() came meanwhile)
// frees it with the GIL released: that may wait (MPI_Comm_free, unmapping, the device
// context's teardown).
class HeldComm {
 public:
  HeldComm() = default;
  explicit HeldComm(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {}
  HeldComm(HeldComm&&) = default;
  HeldComm& operator=(HeldComm&&) = delete;
  ~HeldComm();
  Comm* operator->() const { return comm_.get(); }
  Comm& operator*() const { return *comm_; }
  explicit operator bool() const { return comm_ != nullptr; }

 private:
  std::shared_ptr<Comm> comm_;
};

// The communicator `group` names, kept alive while the result is; null for a group not made
// from Python (the library's own lookup then applies). InvalidArgument naming op once it was
// destroyed.
HeldComm hold_group(const char* op, std::string_view group);

}  // namespace commfuse::python
