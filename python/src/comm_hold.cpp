#include "comm_hold.hpp"

#include <nanobind/nanobind.h>

#include "api/held_comms.hpp"
#include "core/error.hpp"

namespace commfuse::python {

HeldComm::~HeldComm() {
  if (comm_ == nullptr || comm_.use_count() > 1 || !PyGILState_Check()) return;
  nanobind::gil_scoped_release release;
  comm_.reset();
}

// One registry with the C API's (api/held_comms.hpp): PyComm registers and forgets there.
HeldComm hold_group(const char* op, std::string_view group) {
  api::HeldLookup h = api::find_held_comm(group);
  CF_CHECK_ARG(!h.destroyed, op, ": group '", group, "': the communicator was destroyed");
  return HeldComm(std::move(h.comm));
}

}  // namespace commfuse::python
