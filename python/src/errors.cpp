// commfuse::Error and its subclasses become the Python classes that commfuse/_errors.py
// defines and hands over with _register_errors(); each is constructed as cls(message, code).
#include <nanobind/nanobind.h>

#include <commfuse/commfuse.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <exception>

#include "bindings.hpp"
#include "interrupt.hpp"

namespace nb = nanobind;

namespace commfuse::python {
namespace {

// Python exception classes, indexed by kErrorOrder. Strong references that are never
// released: they must outlive every call, and dropping them during interpreter
// shutdown would race module teardown.
constexpr std::array<commfuse::Status, 4> kErrorOrder{
    commfuse::Status::kParamNullptr, commfuse::Status::kParamInvalid,
    commfuse::Status::kRuntimeError, commfuse::Status::kInner};
PyObject* g_base_error = nullptr;
std::array<PyObject*, 4> g_errors{};

PyObject* error_class(commfuse::Status code) {
  for (size_t i = 0; i < kErrorOrder.size(); ++i)
    if (kErrorOrder[i] == code && g_errors[i] != nullptr) return g_errors[i];
  return g_base_error;
}

void register_errors(nb::handle base, nb::handle null_pointer, nb::handle invalid_argument,
                     nb::handle runtime_failure, nb::handle internal_error) {
  const std::array<nb::handle, 5> classes{base, null_pointer, invalid_argument, runtime_failure,
                                          internal_error};
  for (nb::handle cls : classes) {
    if (!PyType_Check(cls.ptr()) || !PyObject_IsSubclass(cls.ptr(), PyExc_Exception))
      throw nb::type_error("_register_errors: every argument must be an Exception subclass");
  }
  g_base_error = base.inc_ref().ptr();
  for (size_t i = 0; i < g_errors.size(); ++i) g_errors[i] = classes[i + 1].inc_ref().ptr();
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const commfuse::Error& e) {
    // A signal handler raised while the call waited (KeyboardInterrupt): that is what the
    // caller meant, and what it catches; the library's message goes along as a note.
    if (restore_interrupt(e.what())) return;
    PyObject* cls = error_class(e.code());
    if (cls == nullptr) {  // _commfuse imported on its own, without the package
      PyErr_Format(PyExc_RuntimeError, "commfuse error %d: %s", static_cast<int>(e.code()),
                   e.what());
      return;
    }
    // "replace": a reason cut to the transport's fixed message size may end inside a
    // multi-byte character (an abort's), which must not turn the error into a decode error.
    const char* what = e.what();
    PyObject* message =
        PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "replace");
    if (message == nullptr) return;  // that error stands
    PyObject* exc = PyObject_CallFunction(cls, "Oi", message, static_cast<int>(e.code()));
    Py_DECREF(message);
    if (exc == nullptr) return;  // constructing the exception failed: that error stands
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def("_register_errors", &register_errors, nb::arg("base"), nb::arg("null_pointer"),
        nb::arg("invalid_argument"), nb::arg("runtime_failure"), nb::arg("internal_error"),
        "Install the Python classes that commfuse::Error and its subclasses are raised as.\n"
        "Each is called as cls(message, code).");
}

}  // namespace commfuse::python
