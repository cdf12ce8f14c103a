#include "interrupt.hpp"

#include <commfuse/commfuse.hpp>

#include <exception>

namespace nb = nanobind;

namespace commfuse::python {
namespace {

// What a handler raised during this thread's call, kept (with the GIL's protection) until the
// call returns to Python.
struct Pending {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
};
thread_local Pending t_pending;

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Runs on a thread waiting inside the library, without the GIL. Only a thread Python knows
// (one that called in from Python) takes the GIL; PyErr_CheckSignals does nothing off the
// main thread. An exception already kept (an earlier call swallowed it) ends no wait: the
// call raises it when it returns.
const char* check_signals() {
  if (t_pending.type != nullptr || PyGILState_GetThisThreadState() == nullptr || finalizing())
    return nullptr;
  const PyGILState_STATE gil = PyGILState_Ensure();
  const char* why = nullptr;
  if (PyErr_CheckSignals() != 0) {
    PyErr_Fetch(&t_pending.type, &t_pending.value, &t_pending.traceback);
    // The type stays alive while kept; the library copies the name at once.
    why = reinterpret_cast<PyTypeObject*>(t_pending.type)->tp_name;
  }
  PyGILState_Release(gil);
  return why;
}

}  // namespace

void install_interrupt_check() {
  commfuse::set_interrupt_check(&check_signals);
}

bool restore_interrupt(const char* message) {
  if (t_pending.type == nullptr) return false;
  PyErr_NormalizeException(&t_pending.type, &t_pending.value, &t_pending.traceback);
  if (message != nullptr && t_pending.value != nullptr) {
    // "commfuse: all_reduce(rank 0): interrupted (KeyboardInterrupt) while waiting for rank
    // 1" under the traceback; a note that cannot be added is no reason to lose the exception.
    PyObject* r = PyObject_CallMethod(t_pending.value, "add_note", "s", message);
    if (r == nullptr) PyErr_Clear();
    Py_XDECREF(r);
  }
  PyErr_Restore(t_pending.type, t_pending.value, t_pending.traceback);
  t_pending = {};
  return true;
}

Released::Released() : uncaught_(std::uncaught_exceptions()) {
  release_.emplace();
}

Released::~Released() noexcept(false) {
  release_.reset();  // the GIL is back
  if (std::uncaught_exceptions() == uncaught_ && restore_interrupt(nullptr))
    throw nb::python_error();
}

}  // namespace commfuse::python
