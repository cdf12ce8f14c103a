// Ctrl-C in a rank blocked in a call. Python runs signal handlers only on the main thread,
// between bytecodes, so a call that waits for a peer that never comes, with the GIL
// released, would ignore Ctrl-C for up to COMMFUSE_TIMEOUT_S. The library's waits poll a
// check (commfuse::set_interrupt_check) that runs the handlers; one that raises ends the
// wait, and its exception (KeyboardInterrupt) is what the call then raises.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>

namespace commfuse::python {

// Installs the check (module import).
void install_interrupt_check();

// Restores, as the current Python error, the exception a signal handler raised during this
// thread's call, with the library's message as a note; false if there is none. GIL held.
bool restore_interrupt(const char* message);

// The GIL released for a call that may wait (replaces nanobind::gil_scoped_release at the
// bindings' calls). Where the call returned although a handler raised during it (an error
// it swallowed: freeing, aborting), that exception is raised once the GIL is back; where the
// call threw, the exception translation raises it (errors.cpp).
class Released {
 public:
  Released();
  ~Released() noexcept(false);
  Released(const Released&) = delete;
  Released& operator=(const Released&) = delete;

 private:
  int uncaught_;
  std::optional<nanobind::gil_scoped_release> release_;
};

}  // namespace commfuse::python
