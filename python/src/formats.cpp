// Number formats (SPEC §1): dtype names, convert and int4 packing on flat byte buffers
// (numpy uint8 / int8 views made by commfuse/_convert.py) plus dtype names; all
// number-format logic stays in libcommfuse.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <commfuse/commfuse.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bindings.hpp"

namespace nb = nanobind;

namespace commfuse::python {
namespace {

using ConstBytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Bytes = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using ConstInt8s = nb::ndarray<const int8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Int8s = nb::ndarray<int8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

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

void bind_formats(nb::module_& m) {
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

}  // namespace commfuse::python
