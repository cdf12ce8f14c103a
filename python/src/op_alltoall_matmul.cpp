// alltoall_matmul (SPEC §3, unquantized): commfuse::alltoall_matmul on TensorRefs.
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

void bind_alltoall_matmul(nb::module_& m) {
  m.def(
      "alltoall_matmul",
      [](const TensorRef& x1, const TensorRef& x2, const std::string& group,
         const TensorRef& output, const TensorRef* all_to_all_out, const TensorRef* bias,
         bool transpose_x2, uintptr_t stream, const PyPackedWeight* packed_x2) {
        const HeldComm held = hold_group("alltoall_matmul", group);
        constexpr const char* kOp = "alltoall_matmul";
        check_output(kOp, group, "output", output);
        if (all_to_all_out != nullptr)
          check_output(kOp, group, "alltoAllOutOptional", *all_to_all_out);
        AlltoAllMatmulOptions options;
        if (bias != nullptr) options.bias = bias->view;
        options.transpose_x2 = transpose_x2;
        options.stream = reinterpret_cast<void*>(stream);  // CUDA arrays: a cudaStream_t
        options.packed_x2 = packed_or_null(packed_x2);
        const KeepIfFailedOverMpi keep(held ? &*held : nullptr,
                                       {&x1, &x2, &output, all_to_all_out, bias,
                                        packed_x2 != nullptr ? &packed_x2->x2 : nullptr});
        Released release;
        alltoall_matmul(x1.view, x2.view, group, output.view, view_or_absent(all_to_all_out),
                        options);
      },
      nb::arg("x1"), nb::arg("x2"), nb::arg("group"), nb::arg("output"),
      nb::arg("all_to_all_out").none(), nb::arg("bias").none(), nb::arg("transpose_x2"),
      nb::arg("stream") = 0, nb::arg("packed_x2").none() = nb::none(),
      "output (BS/R, N) = permuted @ x2 + bias; all_to_all_out (BS/R, R*H) = permuted.");
}

}  // namespace commfuse::python
