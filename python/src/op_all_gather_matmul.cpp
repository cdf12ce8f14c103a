// all_gather_base_mm (SPEC §2): commfuse::all_gather_matmul on TensorRefs. Every argument
// rule is the C++ op's (it rejects through the group); only the output's writability and
// density, which a TensorView cannot express, are checked here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <commfuse/commfuse.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "bindings.hpp"
#include "comm_hold.hpp"
#include "interrupt.hpp"
#include "keep_alive.hpp"
#include "tensor_ref.hpp"

namespace nb = nanobind;

namespace commfuse::python {

void bind_all_gather_matmul(nb::module_& m) {
  m.def(
      "all_gather_matmul",
      [](const TensorRef& x1, const TensorRef& x2, const std::string& group, int world_size,
         const TensorRef& output, const TensorRef* gather_out, const TensorRef* bias,
         int64_t gather_index, bool gather_output, int64_t comm_turn, const TensorRef* x1_scale,
         const TensorRef* x2_scale, uintptr_t stream, const PyPackedWeight* packed_x2) {
        const HeldComm held = hold_group("all_gather_matmul", group);
        constexpr const char* kOp = "all_gather_matmul";
        check_output(kOp, group, "output", output);
        if (gather_out != nullptr) check_output(kOp, group, "gather_out", *gather_out);
        AllGatherMatmulOptions options;
        if (bias != nullptr) options.bias = bias->view;
        options.gather_index = gather_index;
        options.gather_output = gather_output;
        options.comm_turn = comm_turn;
        if (x1_scale != nullptr) options.x1_scale = x1_scale->view;
        if (x2_scale != nullptr) options.x2_scale = x2_scale->view;
        options.stream = reinterpret_cast<void*>(stream);  // CUDA arrays: a cudaStream_t
        options.packed_x2 = packed_or_null(packed_x2);
        const KeepIfFailedOverMpi keep(held ? &*held : nullptr,
                                       {&x1, &x2, &output, gather_out, bias, x1_scale, x2_scale,
                                        packed_x2 != nullptr ? &packed_x2->x2 : nullptr});
        Released release;
        all_gather_matmul(x1.view, x2.view, group, world_size, output.view,
                          view_or_absent(gather_out), options);
      },
      nb::arg("x1"), nb::arg("x2"), nb::arg("group"), nb::arg("world_size"), nb::arg("output"),
      nb::arg("gather_out").none(), nb::arg("bias").none(), nb::arg("gather_index"),
      nb::arg("gather_output"), nb::arg("comm_turn"), nb::arg("x1_scale").none() = nb::none(),
      nb::arg("x2_scale").none() = nb::none(), nb::arg("stream") = 0,
      nb::arg("packed_x2").none() = nb::none(),
      "output (m·R, n) = gather_out @ x2 + bias; gather_out (m·R, k) = rank-order concat of x1 "
      "(SPEC §6 quantized x1: dequantized with x1_scale, x2_scale).");
}

}  // namespace commfuse::python
