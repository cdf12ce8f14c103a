// Arrays -> TensorView (see tensor_ref.hpp).
#include "tensor_ref.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "bindings.hpp"
#include "comm/comm_impl.hpp"
#include "comm_hold.hpp"
#include "core/error.hpp"
#include "interrupt.hpp"
#include "ops/common/op_context.hpp"

namespace nb = nanobind;

namespace commfuse::python {
namespace {

using nb::dlpack::dtype_code;

const char* device_name(int32_t type) {
  switch (type) {
    case nb::device::cpu::value:
      return "cpu";
    case nb::device::cuda::value:
      return "cuda";
    case nb::device::cuda_host::value:
      return "cuda_host";
    default:
      return "a non-CPU device";
  }
}

std::string storage_name(nb::dlpack::dtype t) {
  const char* kind = nullptr;
  switch (static_cast<dtype_code>(t.code)) {
    case dtype_code::Int:
      kind = "int";
      break;
    case dtype_code::UInt:
      kind = "uint";
      break;
    case dtype_code::Float:
      kind = "float";
      break;
    case dtype_code::Bfloat:
      kind = "bfloat";
      break;
    case dtype_code::Bool:
      kind = "bool";
      break;
    default:
      return detail::cat("DLPack type code ", int(t.code), " (", int(t.bits), " bits)");
  }
  return detail::cat(kind, int(t.bits));
}

// The commfuse dtype an array's own element type is, if it is one.
std::optional<DType> own_dtype(nb::dlpack::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  switch (static_cast<dtype_code>(t.code)) {
    case dtype_code::Float:
      if (t.bits == 32) return DType::kFloat32;
      if (t.bits == 16) return DType::kFloat16;
      return std::nullopt;
    case dtype_code::Bfloat:
      return t.bits == 16 ? std::optional(DType::kBFloat16) : std::nullopt;
    case dtype_code::Int:
      if (t.bits == 8) return DType::kInt8;
      if (t.bits == 16) return DType::kInt16;
      if (t.bits == 32) return DType::kInt32;
      if (t.bits == 64) return DType::kInt64;
      return std::nullopt;
    case dtype_code::UInt:
      // Plain uint8/uint16 data; raw codes of another format (HiFloat8, packed int4, ml_dtypes
      // formats as unsigned views) are named by the dtype= argument instead.
      if (t.bits == 8) return DType::kUInt8;
      if (t.bits == 16) return DType::kUInt16;
      return std::nullopt;
    case dtype_code::Bool:
      return t.bits == 8 ? std::optional(DType::kBool) : std::nullopt;
    case dtype_code::Float8_E4M3FN:
      return DType::kFloat8E4M3FN;
    case dtype_code::Float8_E5M2:
      return DType::kFloat8E5M2;
    case dtype_code::Float8_E8M0FNU:
      return DType::kFloat8E8M0;
    default:
      return std::nullopt;
  }
}

}  // namespace

bool TensorRef::contiguous() const {
  if (view.numel() == 0) return true;  // no element to place (strides are normalized anyway)
  int64_t expect = 1;
  for (int i = view.ndim - 1; i >= 0; --i) {
    if (view.shape[i] != 1 && view.strides[i] != expect) return false;
    expect *= view.shape[i];
  }
  return true;
}

size_t TensorRef::storage_bytes() const {
  return dtype_storage_bytes(view.dtype, static_cast<size_t>(view.numel()));
}

TensorRef make_tensor_ref(AnyArray array, std::optional<std::string_view> dtype, bool read_only) {
  const int32_t device = array.device_type();
  CF_CHECK_ARG(device == nb::device::cpu::value || device == nb::device::cuda::value,
               "array is on ", device_name(device), " (device type ", device,
               "); commfuse takes host memory or CUDA device memory");
  const nb::dlpack::dtype storage = array.dtype();
  const size_t ndim = array.ndim();
  CF_CHECK_ARG(ndim <= TensorView::kMaxDims, "array has ", ndim, " dims; at most ",
               TensorView::kMaxDims, " are supported");
  const std::optional<DType> own = own_dtype(storage);
  DType d;
  if (dtype) {
    d = dtype_from_name(*dtype);  // InvalidArgument naming an unknown name
    const int want_bits = d == DType::kInt4 ? 8 : dtype_bits(d);
    const bool raw_codes = storage.code == static_cast<uint8_t>(dtype_code::UInt) ||
                           (d == DType::kInt4 && storage.code == uint8_t(dtype_code::Int));
    CF_CHECK_ARG(storage.lanes == 1 && storage.bits == want_bits && (own == d || raw_codes),
                 "an array of ", storage_name(storage), " cannot hold ", dtype_name(d), " (needs ",
                 d == DType::kInt4
                     ? "packed bytes: uint8 or int8"
                     : detail::cat(dtype_name(d), " or raw uint", want_bits, " codes"),
                 ")");
  } else {
    CF_CHECK_ARG(own.has_value(), "an array of ", storage_name(storage),
                 " is not a commfuse dtype (float32, float16, bfloat16, float8_e4m3fn, "
                 "float8_e5m2, float8_e8m0, int8, int16, int32, int64, uint8, uint16, bool); "
                 "raw codes such as HiFloat8 in uint8 need dtype='hifloat8'");
    d = *own;
  }

  TensorRef t;
  t.array = array;
  t.read_only = read_only;
  TensorView& v = t.view;
  v.data = const_cast<void*>(array.data());  // inputs are never written through it
  v.dtype = d;
  if (device == nb::device::cuda::value)  // the ops that take it check it (device_plans)
    v.device = {DeviceType::kCuda, static_cast<int>(array.device_id())};
  v.ndim = static_cast<int>(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    v.shape[i] = static_cast<int64_t>(array.shape(i));
    v.strides[i] = array.stride(i);
  }
  // A 0-d array (a numpy or torch scalar) holds one element: it is passed as shape (1,). A
  // TensorView of no dims means "absent", so as 0-d a scalar bias or scale was silently
  // ignored and a scalar collective moved nothing.
  if (ndim == 0) {
    v.ndim = 1;
    v.shape[0] = 1;
    v.strides[0] = 1;
  }
  if (v.numel() == 0) {
    // No element to place: exporters differ on such strides (numpy's DLPack gives 0s), so
    // give the row-major ones the ops expect.
    int64_t stride = 1;
    for (int i = v.ndim - 1; i >= 0; --i) {
      v.strides[i] = stride;
      stride *= std::max<int64_t>(v.shape[i], 1);
    }
  }
  if (d == DType::kInt4) {
    // Two elements per byte along the last dim, which must be dense.
    CF_CHECK_ARG(ndim >= 1, "an int4 tensor needs at least one dim (packed along the last)");
    const size_t last = ndim - 1;
    CF_CHECK_ARG(v.shape[last] <= 1 || v.strides[last] == 1,
                 "packed int4 bytes must be contiguous along the last dim (stride ",
                 v.strides[last], ")");
    for (size_t i = 0; i < last; ++i) v.strides[i] *= 2;
    v.shape[last] *= 2;
    v.strides[last] = 1;
  }
  return t;
}

[[noreturn]] void reject_in_group(std::string_view group, Status code, const std::string& message) {
  {
    // Called with the GIL; telling waits for the peers (bounded): other threads run.
    Released release;
    ops::tell_peers_rejected(group, message.c_str());  // no such group: only this rank learns
  }
  detail::throw_status(code, message);
}

void check_output(const char* op, std::string_view group, const char* name, const TensorRef& t) {
  if (!t.read_only && t.contiguous()) return;
  int rank = -1;
  try {
    rank = find_comm(group).rank();
  } catch (const Error&) {
  }
  const std::string where = detail::cat(op, "(rank ", rank, "): ", name, " ");
  if (t.read_only) reject_in_group(group, Status::kParamInvalid, where + "is read-only");
  reject_in_group(group, Status::kParamInvalid,
                  where + "must be row-major contiguous (outputs are written densely)");
}

void bind_tensor_ref(nb::module_& m) {
  nb::class_<TensorRef>(m, "TensorRef",
                        "One array argument as libcommfuse sees it: the array (kept alive) and a "
                        "view of its memory. Never copies.")
      .def(
          "__init__",
          [](TensorRef* self, AnyArray array, std::optional<std::string_view> dtype,
             bool read_only) { new (self) TensorRef(make_tensor_ref(array, dtype, read_only)); },
          nb::arg("array").noconvert(), nb::arg("dtype").none() = nb::none(),
          nb::arg("read_only") = false,
          "Wrap an array (DLPack or buffer protocol, on the CPU or a CUDA device). dtype names "
          "its format when "
          "the element type does not (raw codes, e.g. 'hifloat8' in uint8; 'int4' packed in "
          "uint8, two per byte along the last dim); None takes the array's own dtype.")
      .def_prop_ro(
          "data_ptr", [](const TensorRef& t) { return reinterpret_cast<uintptr_t>(t.view.data); },
          "Address of the first element: the caller's memory, not a copy.")
      .def_prop_ro(
          "dtype", [](const TensorRef& t) { return std::string(dtype_name(t.view.dtype)); },
          "commfuse dtype name.")
      .def_prop_ro(
          "shape",
          [](const TensorRef& t) {
            nb::list l;
            for (int i = 0; i < t.view.ndim; ++i) l.append(t.view.shape[i]);
            return nb::tuple(l);
          },
          "Logical shape (int4: elements, two per byte).")
      .def_prop_ro(
          "strides",
          [](const TensorRef& t) {
            nb::list l;
            for (int i = 0; i < t.view.ndim; ++i) l.append(t.view.strides[i]);
            return nb::tuple(l);
          },
          "Strides in elements.")
      .def_prop_ro(
          "read_only", [](const TensorRef& t) { return t.read_only; },
          "The caller's array must not be written (refused as an output).")
      .def_prop_ro("contiguous", &TensorRef::contiguous, "Row-major dense.")
      .def_prop_ro(
          "numel", [](const TensorRef& t) { return t.view.numel(); }, "Number of elements.");

  m.def(
      "group_info",
      [](std::string_view group) {
        try {
          const HeldComm held = hold_group("group_info", group);  // alive while read
          Comm& c = held ? *held : find_comm(group);
          return std::make_tuple(c.rank(), c.world_size());
        } catch (const Error&) {
          return std::make_tuple(-1, -1);
        }
      },
      nb::arg("group"), "(rank, world_size) of the live communicator `group`, or (-1, -1).");
  m.def(
      "reject_group",
      [](std::string_view group, const std::string& message) {
        // A Python-side argument error on one rank: rejected like a C++ one (the peers in
        // the call fail it naming this rank; the communicator stays usable).
        try {
          const HeldComm held = hold_group("reject_group", group);
          Released release;  // telling waits for the peers (bounded)
          ops::tell_peers_rejected(group, message.c_str());
        } catch (const Error&) {  // destroyed: no peers to tell
        }
      },
      nb::arg("group"), nb::arg("message"),
      "Tell the peers of the live communicator named `group` (no-op when there is none) "
      "that this rank rejected the call they are in, with `message`.");
}

}  // namespace commfuse::python
