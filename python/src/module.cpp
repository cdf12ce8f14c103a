// commfuse._commfuse: the thin nanobind layer under the `commfuse` Python package.
//
// Every function works on flat byte buffers (numpy uint8 / int8 views made by
// commfuse/__init__.py) plus dtype names, so numpy's dtype zoo (ml_dtypes included)
// stays on the Python side and all number-format logic stays in libcommfuse.
//
// commfuse::Error and its subclasses become the Python classes that __init__.py defines
// and hands over with _register_errors(); each is constructed as cls(message, code).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <commfuse/commfuse.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace nb = nanobind;

namespace {

using ConstBytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Bytes = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using ConstInt8s = nb::ndarray<const int8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Int8s = nb::ndarray<int8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

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
    PyObject* cls = error_class(e.code());
    if (cls == nullptr) {  // _commfuse imported on its own, without the package
      PyErr_Format(PyExc_RuntimeError, "commfuse error %d: %s", static_cast<int>(e.code()),
                   e.what());
      return;
    }
    PyObject* exc = PyObject_CallFunction(cls, "si", e.what(), static_cast<int>(e.code()));
    if (exc == nullptr) return;  // constructing the exception failed: that error stands
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
  }
}

commfuse::DType parse(std::string_view name) {
  return commfuse::dtype_from_name(name);
}

// Bytes that count elements of dtype occupy must fit in a buffer of `have` bytes.
void check_size(const char* fn, const char* arg, commfuse::DType dtype, size_t count, size_t have) {
  const size_t need = commfuse::dtype_storage_bytes(dtype, count);
  if (need > have)
    throw commfuse::InvalidArgument(std::string(fn) + ": " + arg + " holds " +
                                    std::to_string(have) + " bytes but " + std::to_string(count) +
                                    " " + std::string(commfuse::dtype_name(dtype)) +
                                    " elements need " + std::to_string(need));
}

void convert(ConstBytes src, std::string_view src_dtype, Bytes dst, std::string_view dst_dtype,
             size_t count, bool saturate) {
  const commfuse::DType s = parse(src_dtype);
  const commfuse::DType d = parse(dst_dtype);
  check_size("convert", "src", s, count, src.size());
  check_size("convert", "dst", d, count, dst.size());
  const void* src_ptr = src.data();
  void* dst_ptr = dst.data();
  nb::gil_scoped_release release;
  commfuse::convert(src_ptr, s, dst_ptr, d, count, saturate);
}

void pack_int4(ConstInt8s src, Bytes dst, size_t count) {
  if (count > src.size())
    throw commfuse::InvalidArgument("pack_int4: src holds " + std::to_string(src.size()) +
                                    " elements but count is " + std::to_string(count));
  check_size("pack_int4", "dst", commfuse::DType::kInt4, count, dst.size());
  const int8_t* src_ptr = src.data();
  uint8_t* dst_ptr = dst.data();
  nb::gil_scoped_release release;
  commfuse::pack_int4(src_ptr, dst_ptr, count);
}

void unpack_int4(ConstBytes src, Int8s dst, size_t count) {
  check_size("unpack_int4", "src", commfuse::DType::kInt4, count, src.size());
  if (count > dst.size())
    throw commfuse::InvalidArgument("unpack_int4: dst holds " + std::to_string(dst.size()) +
                                    " elements but count is " + std::to_string(count));
  const uint8_t* src_ptr = src.data();
  int8_t* dst_ptr = dst.data();
  nb::gil_scoped_release release;
  commfuse::unpack_int4(src_ptr, dst_ptr, count);
}

}  // namespace

NB_MODULE(_commfuse, m) {
  m.doc() = "Low-level bindings of libcommfuse; use the `commfuse` package instead.";
  nb::register_exception_translator(translate);

  m.def("_register_errors", &register_errors, nb::arg("base"), nb::arg("null_pointer"),
        nb::arg("invalid_argument"), nb::arg("runtime_failure"), nb::arg("internal_error"),
        "Install the Python classes that commfuse::Error and its subclasses are raised as.\n"
        "Each is called as cls(message, code).");

  m.def(
      "version", [] { return std::string(commfuse::version()); },
      "Version of libcommfuse, e.g. '0.1.0'.");
  m.def(
      "status_name",
      [](int code) {
        return std::string(commfuse::status_name(static_cast<commfuse::Status>(code)));
      },
      nb::arg("code"), "Fixed name of a SPEC §0 status code, e.g. 'PARAM_INVALID'.");

  m.def(
      "dtype_name",
      [](std::string_view name) { return std::string(commfuse::dtype_name(parse(name))); },
      nb::arg("name"),
      "Canonical commfuse name of a dtype name or alias ('bf16' -> 'bfloat16').\n"
      "Raises InvalidArgument for an unknown name.");
  m.def(
      "dtype_bits", [](std::string_view name) { return commfuse::dtype_bits(parse(name)); },
      nb::arg("name"), "Bits per element of a dtype (int4: 4).");
  m.def(
      "dtype_code", [](std::string_view name) { return static_cast<int>(parse(name)); },
      nb::arg("name"), "commfuseDataType value (= CANN aclDataType) of a dtype.");

  // .noconvert(): a buffer of the wrong dtype must fail, not be copied silently (a copied
  // dst would swallow the result).
  m.def("convert", &convert, nb::arg("src").noconvert(), nb::arg("src_dtype"),
        nb::arg("dst").noconvert(), nb::arg("dst_dtype"), nb::arg("count"),
        nb::arg("saturate") = false,
        "Convert count elements between flat byte buffers (SPEC §1); int4 is packed.");
  m.def("pack_int4", &pack_int4, nb::arg("src").noconvert(), nb::arg("dst").noconvert(),
        nb::arg("count"),
        "Pack count int8 values in [-8, 7] into dst, element 2j in the low nibble of byte j.");
  m.def("unpack_int4", &unpack_int4, nb::arg("src").noconvert(), nb::arg("dst").noconvert(),
        nb::arg("count"), "Unpack count int4 elements from src into int8 dst.");
}
