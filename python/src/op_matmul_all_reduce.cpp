// mm_all_reduce_base (SPEC §2): commfuse::matmul_all_reduce on TensorRefs.
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

void bind_matmul_all_reduce(nb::module_& m) {
  m.def(
      "matmul_all_reduce",
      [](const TensorRef& x1, const TensorRef& x2, const std::string& group,
         const TensorRef& output, const std::string& reduce_op, const TensorRef* bias,
         int64_t comm_turn, const TensorRef* x1_scale, const TensorRef* x2_scale, uintptr_t stream,
         const PyPackedWeight* packed_x2) {
        const HeldComm held = hold_group("matmul_all_reduce", group);
        check_output("matmul_all_reduce", group, "output", output);
        MatmulReduceOptions options;
        options.reduce_op = reduce_op;
        if (bias != nullptr) options.bias = bias->view;
        options.comm_turn = comm_turn;
        if (x1_scale != nullptr) options.x1_scale = x1_scale->view;
        if (x2_scale != nullptr) options.x2_scale = x2_scale->view;
        options.stream = reinterpret_cast<void*>(stream);  // CUDA arrays: a cudaStream_t
        options.packed_x2 = packed_or_null(packed_x2);
        const KeepIfFailedOverMpi keep(held ? &*held : nullptr,
                                       {&x1, &x2, &output, bias, x1_scale, x2_scale,
                                        packed_x2 != nullptr ? &packed_x2->x2 : nullptr});
        Released release;
        matmul_all_reduce(x1.view, x2.view, group, output.view, options);
      },
      nb::arg("x1"), nb::arg("x2"), nb::arg("group"), nb::arg("output"), nb::arg("reduce_op"),
      nb::arg("bias").none(), nb::arg("comm_turn"), nb::arg("x1_scale").none() = nb::none(),
      nb::arg("x2_scale").none() = nb::none(), nb::arg("stream") = 0,
      nb::arg("packed_x2").none() = nb::none(),
      "output (x1's leading dims, n) = Σ_s x1_s @ x2_s + bias, identical on every rank.");
}

}  // namespace commfuse::python
