#include "interrupt.hpp"

#include <commfuse/commfuse.hpp>

#include <pthread.h>

#include <atomic>
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
// Calls of this thread inside Released: only those run Python's handlers. A wait reached
// otherwise (a C call through ctypes, a destructor waiting with the GIL held) must not take
// the signal: no one would raise its exception (seen: a ctypes call failed "interrupted",
// and the next, unrelated call raised the stale KeyboardInterrupt).
thread_local int t_released_calls = 0;
// Python's main thread, the one its signal handlers run on (PyErr_CheckSignals does nothing
// elsewhere): other threads need not take the GIL every 100 ms for nothing. A fork() child's
// main thread is the thread that forked.
std::atomic<unsigned long> g_main_thread{0};

void forget_in_child() {
  t_pending = {};  // the references belong to the parent's objects, copied: dropped unowned
  g_main_thread.store(PyThread_get_thread_ident(), std::memory_order_relaxed);
}

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
  if (t_released_calls == 0 || t_pending.type != nullptr ||
      PyThread_get_thread_ident() != g_main_thread.load(std::memory_order_relaxed) || finalizing())
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
  nb::object main = nb::module_::import_("threading").attr("main_thread")();
  g_main_thread.store(nb::cast<unsigned long>(main.attr("ident")), std::memory_order_relaxed);
  pthread_atfork(nullptr, nullptr, &forget_in_child);
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
  ++t_released_calls;
  release_.emplace();
}

Released::~Released() noexcept(false) {
  release_.reset();  // the GIL is back
  --t_released_calls;
  if (std::uncaught_exceptions() == uncaught_ && restore_interrupt(nullptr))
    throw nb::python_error();
}

}  // namespace commfuse::python
